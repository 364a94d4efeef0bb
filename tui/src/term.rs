//! The terminal: taken over only once the traces are loaded, given back
//! on the way out and on a panic. Input is read on its own thread, the
//! findings are worked out on another; both send their news to the loop,
//! which applies what came while it drew before drawing again.

use std::io::IsTerminal;
use std::sync::{mpsc, Arc};

use ratatui::crossterm::event::{self, DisableMouseCapture, EnableMouseCapture, Event};
use ratatui::crossterm::execute;

use crate::data::Session;
use crate::style::Palette;
use crate::update::{update, Control};

/// Why the timeline could not be shown.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("the timeline needs a terminal: standard input and output must be a TTY")]
    NoTerminal,
    #[error("the terminal's input ended")]
    InputClosed,
    #[error("terminal: {0}")]
    Io(#[from] std::io::Error),
}

/// Whether standard input and output are a terminal the timeline can use.
pub fn check_terminal() -> Result<(), Error> {
    if std::io::stdin().is_terminal() && std::io::stdout().is_terminal() {
        Ok(())
    } else {
        Err(Error::NoTerminal)
    }
}

/// What the loop hears of.
enum Msg {
    Input(std::io::Result<Event>),
    /// The findings and the summary by line are ready.
    Analyzed,
}

/// Shows the session until the user quits. The first frame comes at once;
/// the findings follow when the session is analyzed (on a thread of its
/// own, unless [`Session::analyze`] was called before).
pub fn run(session: Arc<Session>) -> Result<(), Error> {
    check_terminal()?;
    let palette = Palette::from_env();
    let size = ratatui::crossterm::terminal::size()?;
    let mut state =
        crate::view::open_state(&session, ratatui::layout::Rect::new(0, 0, size.0, size.1));
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
        let (tx, rx) = mpsc::channel::<Msg>();
        // Both threads end with the process: the reader blocks in read,
        // and quitting does not wait for the analysis.
        let input = tx.clone();
        std::thread::Builder::new()
            .name("accprof-tui-input".into())
            .spawn(move || loop {
                let e = event::read();
                let failed = e.is_err();
                if input.send(Msg::Input(e)).is_err() || failed {
                    break;
                }
            })?;
        if !session.analyzed() {
            let s = Arc::clone(&session);
            std::thread::Builder::new()
                .name("accprof-tui-analysis".into())
                .spawn(move || {
                    s.analyze();
                    let _ = tx.send(Msg::Analyzed);
                })?;
        }
        let session = &*session;
        loop {
            terminal.draw(|f| {
                let area = f.area();
                crate::view::render(session, &state, palette, area, f.buffer_mut());
            })?;
            let size = terminal.size()?;
            let area = ratatui::layout::Rect::new(0, 0, size.width, size.height);
            let mut next = Some(rx.recv().map_err(|_| Error::InputClosed)?);
            // Whatever else came meanwhile is applied before the next draw.
            while let Some(msg) = next {
                match msg {
                    Msg::Analyzed => state.analyzed(session),
                    Msg::Input(e) => {
                        if update(session, &mut state, area, &e?) == Control::Quit {
                            return Ok(());
                        }
                    }
                }
                next = rx.try_recv().ok();
            }
        }
    })();
    let _ = execute!(std::io::stdout(), DisableMouseCapture);
    ratatui::try_restore()?;
    result
}
