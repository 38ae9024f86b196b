//! Near-repeats: two results of the same action that differ only in their numbers
//! (counts, sizes, line numbers, timestamps, ids) told the model nothing new. A result's
//! *shape* is the set of its lines with every run of digits masked; a later result whose
//! every line is already a line of the earlier one's shape brought nothing new, unless a
//! progress figure in it rose (a percentage, `3/10`, `45 of 120`): a job moving toward its
//! end. A result that is little more than its numbers (`{"n": 4}`, a ticket) is no
//! near-repeat: there the number is the information.

use std::collections::HashSet;
use std::sync::LazyLock;

use regex::Regex;

use super::noise::{denoise, hash};

/// Letters (outside numbers) a result must hold for its numbers to be counted as mere
/// counters: below this, the numbers are what it says.
pub const MIN_SHAPE_LETTERS: usize = 24;

/// Results longer than this are compared on their first this many bytes (a line cut in
/// the middle is cut alike in both).
const READ_BYTES: usize = 64 * 1024;

/// Progress figures: a percentage, or a count toward a total (`3/10`, `45 of 120`).
static PROGRESS: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(r"(?i)(\d+(?:\.\d+)?)\s?%|\b(\d+)\s?(?:/|of|out of)\s?(\d+)\b").ok()
});

/// What a near-repeat check keeps of one result.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Shape {
    /// Hashes of its lines (trimmed, digits masked, empty ones left out).
    lines: HashSet<u64>,
    /// Its progress figures in order (a percentage in thousandths, a count as it is).
    progress: Vec<u64>,
    /// Letters outside its numbers.
    letters: usize,
}

/// The shape of `result`.
pub fn shape(result: &str) -> Shape {
    let mut end = result.len().min(READ_BYTES);
    while !result.is_char_boundary(end) {
        end -= 1;
    }
    let text = &result[..end];
    let progress = progress_of(text);
    let denoised = denoise(text);
    let mut lines = HashSet::new();
    let mut letters = 0;
    let mut masked = String::new();
    for line in denoised.lines() {
        masked.clear();
        let mut in_digits = false;
        for c in line.trim().chars() {
            if c.is_ascii_digit() {
                if !in_digits {
                    masked.push('#');
                }
                in_digits = true;
                continue;
            }
            in_digits = false;
            letters += usize::from(c.is_alphabetic());
            masked.push(c);
        }
        if !masked.is_empty() {
            lines.insert(hash(&masked));
        }
    }
    Shape {
        lines,
        progress,
        letters,
    }
}

/// The progress figures of `text`, in order.
fn progress_of(text: &str) -> Vec<u64> {
    let Some(re) = PROGRESS.as_ref() else {
        return Vec::new();
    };
    re.captures_iter(text)
        .filter_map(|caps| {
            if let Some(percent) = caps.get(1) {
                let value: f64 = percent.as_str().parse().ok()?;
                // Thousandths of a percent, so 45.5% and 45.6% differ.
                return Some((value * 1000.0) as u64);
            }
            caps.get(2)?.as_str().parse().ok()
        })
        .collect()
}

/// True when `now`, a result of the same action as `earlier` with nothing else done in
/// between, brought nothing new but numbers: every line of it is a line `earlier` had
/// (numbers masked), it holds text beyond its numbers, and no progress figure rose.
pub fn near_repeat(earlier: &str, now: &str) -> bool {
    let (before, after) = (shape(earlier), shape(now));
    after.letters >= MIN_SHAPE_LETTERS
        && !after.lines.is_empty()
        && after.lines.is_subset(&before.lines)
        && !rose(&before.progress, &after.progress)
}

/// True when a progress figure of `after` is higher than the one in its place in `before`
/// (or `after` has figures `before` had none of).
fn rose(before: &[u64], after: &[u64]) -> bool {
    after.len() > before.len() || after.iter().zip(before).any(|(a, b)| a > b)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn edit_result(total: u32, imports: u32) -> String {
        let mut out = format!("[File: /src/Main.java ({total} lines total)]\n");
        let mut n = 0;
        for _ in 0..imports {
            for line in ["import java.util.List;", "import java.util.Map;"] {
                n += 1;
                out.push_str(&format!("{n}:{line}\n"));
            }
        }
        for code in [
            "public class Main {",
            "    public static void main(String[] args) {",
            "        System.out.println(\"hi\");",
            "    }",
        ] {
            n += 1;
            out.push_str(&format!("{n}:{code}\n"));
        }
        out.push_str("File updated. Please review the changes and make sure they are correct.");
        out
    }

    #[test]
    fn a_growing_file_shown_again_is_a_near_repeat() {
        assert!(near_repeat(&edit_result(174, 1), &edit_result(228, 2)));
        assert!(near_repeat(&edit_result(228, 2), &edit_result(282, 3)));
        assert!(
            near_repeat(
                "Build log: 1024 bytes written, 3 warnings",
                "Build log: 2048 bytes written, 3 warnings"
            ),
            "a size that changes is no news"
        );
    }

    #[test]
    fn new_text_rising_progress_and_bare_numbers_are_not() {
        assert!(!near_repeat(
            "status: running, the export has written its rows",
            "status: finished, the export has written its rows"
        ));
        assert!(!near_repeat(
            "export running: 45% of the rows written so far",
            "export running: 60% of the rows written so far"
        ));
        assert!(!near_repeat(
            "compiling the workspace crates: 12/40 done",
            "compiling the workspace crates: 13/40 done"
        ));
        assert!(
            !near_repeat("{\"n\":3}", "{\"n\":4}"),
            "the number is the news"
        );
        assert!(!near_repeat(
            "page 1: the quick brown fox jumps over",
            "page 2: a lazy dog sleeps in the sun all day"
        ));
        assert!(!near_repeat("", ""), "nothing at all is no shape");
    }

    #[test]
    fn a_falling_figure_or_the_same_one_is_no_progress() {
        assert!(!near_repeat(
            "retrying the upload, 80% of the parts failed",
            "retrying the upload, 80% of the parts failed again"
        ));
        assert!(near_repeat(
            "queue position 7 of 9, your job is waiting for a worker",
            "queue position 7 of 9, your job is waiting for a worker"
        ));
        assert!(near_repeat(
            "disk usage warning: 91% of the volume used by logs",
            "disk usage warning: 90% of the volume used by logs"
        ));
    }

    #[test]
    fn long_and_multibyte_results_are_read_safely() {
        let long = "Straße ü 12 — ".repeat(10_000);
        assert!(near_repeat(&long, &long));
        assert!(!shape(&long).lines.is_empty());
    }
}
