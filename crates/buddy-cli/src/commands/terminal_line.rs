//! A line from the terminal that can be given up on: a question whose turn was
//! cancelled (Ctrl-C) or whose answer is no longer wanted stops waiting at once,
//! instead of holding a thread on stdin until the person presses Enter.

/// How often a waiting read looks whether it should give up, in milliseconds.
const LOOK_EVERY_MS: i64 = 100;

/// Shows `question` on stderr and reads the person's line; `None` at end of input or
/// once `give_up` says so.
pub fn ask(question: &str, give_up: &dyn Fn() -> bool) -> Option<String> {
    use std::io::Write;
    let mut err = std::io::stderr();
    let _ = write!(err, "{question}");
    let _ = err.flush();
    read_line(give_up)
}

/// Reads one line from stdin; `None` at end of input, on an error, or once `give_up`
/// says so.
pub fn read_line(give_up: &dyn Fn() -> bool) -> Option<String> {
    #[cfg(unix)]
    {
        read_line_from(std::io::stdin(), give_up)
    }
    #[cfg(not(unix))]
    {
        let _ = give_up;
        let mut line = String::new();
        match std::io::BufRead::read_line(&mut std::io::stdin().lock(), &mut line) {
            Ok(0) | Err(_) => None,
            Ok(_) => Some(line.trim_end_matches(['\n', '\r']).to_owned()),
        }
    }
}

/// [`read_line`] from `input`: waits in short polls, so `give_up` is looked at between
/// them; reads a byte at a time up to the newline, so nothing after it is taken from
/// the input (the next question, or a piped answer, finds it there).
#[cfg(unix)]
fn read_line_from(input: impl std::os::fd::AsFd, give_up: &dyn Fn() -> bool) -> Option<String> {
    use rustix::event::{PollFd, PollFlags, Timespec, poll};
    let wait = Timespec {
        tv_sec: 0,
        tv_nsec: LOOK_EVERY_MS * 1_000_000,
    };
    let mut line = Vec::new();
    loop {
        if give_up() {
            return None;
        }
        let mut fds = [PollFd::new(&input, PollFlags::IN)];
        match poll(&mut fds, Some(&wait)) {
            Ok(0) | Err(rustix::io::Errno::INTR) => continue,
            Ok(_) => {}
            Err(_) => return None,
        }
        let mut byte = [0u8; 1];
        match rustix::io::read(&input, &mut byte) {
            Err(rustix::io::Errno::INTR) => {}
            Err(_) => return None,
            Ok(0) => {
                return (!line.is_empty()).then(|| String::from_utf8_lossy(&line).into_owned());
            }
            Ok(_) if byte[0] == b'\n' => {
                let text = String::from_utf8_lossy(&line);
                return Some(text.trim_end_matches('\r').to_owned());
            }
            Ok(_) => line.push(byte[0]),
        }
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::io::Write;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Duration;

    #[test]
    fn a_line_comes_back_without_its_newline_and_then_the_end() {
        let (read, mut written) = std::io::pipe().unwrap();
        written.write_all(b"Ada Lovelace\r\n").unwrap();
        assert_eq!(
            read_line_from(&read, &|| false).as_deref(),
            Some("Ada Lovelace")
        );
        drop(written);
        assert_eq!(read_line_from(&read, &|| false), None, "end of input");
    }

    #[test]
    fn what_follows_the_line_stays_for_the_next_read() {
        let (read, mut written) = std::io::pipe().unwrap();
        written.write_all(b"y\nWhy not\n").unwrap();
        // Bounded: a read that took the second line along would wait for a third.
        let until = std::time::Instant::now() + Duration::from_secs(5);
        let late = || std::time::Instant::now() > until;
        assert_eq!(read_line_from(&read, &late).as_deref(), Some("y"));
        assert_eq!(read_line_from(&read, &late).as_deref(), Some("Why not"));
    }

    #[test]
    fn a_line_in_pieces_is_put_together() {
        let (read, mut written) = std::io::pipe().unwrap();
        let writer = std::thread::spawn(move || {
            written.write_all(b"forty").unwrap();
            std::thread::sleep(Duration::from_millis(150));
            written.write_all(b"-two\n").unwrap();
            written
        });
        assert_eq!(
            read_line_from(&read, &|| false).as_deref(),
            Some("forty-two")
        );
        drop(writer.join().unwrap());
    }

    #[test]
    fn giving_up_ends_a_wait_nobody_answers() {
        let (read, written) = std::io::pipe().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let stopper = {
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(200));
                stop.store(true, Ordering::SeqCst);
            })
        };
        assert_eq!(read_line_from(&read, &|| stop.load(Ordering::SeqCst)), None);
        stopper.join().unwrap();
        drop(written);
    }
}
