//! The terminal: taken over only once everything is loaded, given back on
//! the way out and on a panic. Input is read on its own thread and sent
//! to the loop, which coalesces what came while it drew.

use std::io::IsTerminal;
use std::sync::mpsc;

use ratatui::crossterm::event::{self, DisableMouseCapture, EnableMouseCapture, Event};
use ratatui::crossterm::execute;

use crate::data::Session;
use crate::state::State;
use crate::style::Palette;
use crate::update::{update, Control};
use crate::Error;

/// Whether standard input and output are a terminal the timeline can use.
pub fn check_terminal() -> Result<(), Error> {
    if std::io::stdin().is_terminal() && std::io::stdout().is_terminal() {
        Ok(())
    } else {
        Err(Error::NoTerminal)
    }
}

/// Shows the session until the user quits.
pub fn run(session: &Session) -> Result<(), Error> {
    check_terminal()?;
    let palette = Palette::from_env();
    let mut state = State::new(session);
    // ratatui's init installs a panic hook that gives the terminal back;
    // the hook set here first turns the mouse reporting off too.
    let mut terminal = ratatui::try_init()?;
    let restore_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let _ = execute!(std::io::stdout(), DisableMouseCapture);
        restore_hook(info);
    }));
    let result = (|| -> Result<(), Error> {
        execute!(std::io::stdout(), EnableMouseCapture)?;
        let (tx, rx) = mpsc::channel::<std::io::Result<Event>>();
        // The reader thread ends with the process (it blocks in read).
        std::thread::Builder::new()
            .name("accprof-tui-input".into())
            .spawn(move || loop {
                let e = event::read();
                let failed = e.is_err();
                if tx.send(e).is_err() || failed {
                    break;
                }
            })?;
        loop {
            terminal.draw(|f| {
                let area = f.area();
                crate::view::render(session, &state, palette, area, f.buffer_mut());
            })?;
            let size = terminal.size()?;
            let area = ratatui::layout::Rect::new(0, 0, size.width, size.height);
            let first = rx.recv().map_err(|_| Error::InputClosed)??;
            if update(session, &mut state, area, &first) == Control::Quit {
                return Ok(());
            }
            // Whatever else came meanwhile is applied before the next draw.
            while let Ok(e) = rx.try_recv() {
                if update(session, &mut state, area, &e?) == Control::Quit {
                    return Ok(());
                }
            }
        }
    })();
    let _ = execute!(std::io::stdout(), DisableMouseCapture);
    ratatui::try_restore()?;
    result
}
