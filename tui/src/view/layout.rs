//! Where each part of the screen goes, and which rows the lanes show:
//! shared by the drawing and the input handling (the mouse needs to know
//! where the lanes are).

use ratatui::layout::Rect;

use crate::data::Session;
use crate::state::State;

/// The smallest terminal the timeline fits in.
pub const MIN_WIDTH: u16 = 80;
pub const MIN_HEIGHT: u16 = 24;

/// Width of the lane names left of the lanes.
pub const LABEL_WIDTH: u16 = 22;

/// Where each part of the screen goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Areas {
    /// Where the wall time of the run at the cursor went (its ledger).
    pub header: Rect,
    /// The time ruler and the row of finding marks under it.
    pub ruler: Rect,
    pub marks: Rect,
    /// Lane names and lanes.
    pub labels: Rect,
    pub lanes: Rect,
    pub details: Rect,
    /// The side panel (findings or lines) and the present table.
    pub panel: Option<Rect>,
    pub present: Option<Rect>,
    pub status: Rect,
}

/// The layout of an `area`-sized screen for `state`; None when it is too small.
pub fn layout(area: Rect, state: &State) -> Option<Areas> {
    if area.width < MIN_WIDTH || area.height < MIN_HEIGHT {
        return None;
    }
    let status = Rect::new(area.x, area.y + area.height - 1, area.width, 1);
    let body_h = area.height - 1;
    let side_w = if state.panel.is_some() {
        (area.width * 3 / 8).clamp(34, 48)
    } else {
        0
    };
    let left_w = area.width - side_w;
    let details_h = (body_h / 4).clamp(8, 11);
    let top_h = body_h - details_h;
    let header = Rect::new(area.x, area.y, left_w, 1);
    let ruler = Rect::new(area.x + LABEL_WIDTH, area.y + 1, left_w - LABEL_WIDTH, 1);
    let marks = Rect::new(area.x + LABEL_WIDTH, area.y + 2, left_w - LABEL_WIDTH, 1);
    let labels = Rect::new(area.x, area.y + 3, LABEL_WIDTH, top_h - 3);
    let lanes = Rect::new(
        area.x + LABEL_WIDTH,
        area.y + 3,
        left_w - LABEL_WIDTH,
        top_h - 3,
    );
    let details = Rect::new(area.x, area.y + top_h, left_w, details_h);
    let (panel, present) = if side_w > 0 {
        let present_h = (body_h / 3).clamp(7, 12);
        (
            Some(Rect::new(
                area.x + left_w,
                area.y,
                side_w,
                body_h - present_h,
            )),
            Some(Rect::new(
                area.x + left_w,
                area.y + body_h - present_h,
                side_w,
                present_h,
            )),
        )
    } else {
        (None, None)
    };
    Some(Areas {
        header,
        ruler,
        marks,
        labels,
        lanes,
        details,
        panel,
        present,
        status,
    })
}

/// The state a screen of `area` opens with: every lane, or one row per
/// trace where they do not fit.
pub fn open_state(session: &Session, area: Rect) -> State {
    let mut st = State::new(session);
    if let Some(a) = layout(area, &st) {
        st.fit_rows(session, a.lanes.height as usize);
    }
    st
}

/// The first row shown so that the cursor's row is in a view `height` rows tall.
pub fn first_row(state: &State, height: usize) -> usize {
    let h = height.max(1);
    let mut first = state.scroll.min(state.rows.len().saturating_sub(1));
    if state.cursor < first {
        first = state.cursor;
    } else if state.cursor >= first + h {
        first = state.cursor + 1 - h;
    }
    first
}
