//! `buddy bench memory --via run`: one turn through `buddy run`, its peak resident memory
//! (its high-water mark, sampled until it exits) over the peak of a completed turn with a
//! 1 KiB argument, as a multiple of the argument.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use super::load::status_kib;
use crate::memory_path::MemoryPath;
use crate::memory_setup::prepare;

/// What one `buddy run` showed: its peak resident memory in KiB and its output.
struct RunPeak {
    peak_kib: u64,
    output: String,
}

/// Runs `buddy run` once in `dir`, sampling its high-water mark every few milliseconds
/// until it exits.
async fn run_once(buddy: &Path, dir: &Path) -> Result<RunPeak, String> {
    let child = tokio::process::Command::new(buddy)
        .args([
            "--config",
            "buddy.toml",
            "run",
            "Count the bytes of this text.",
        ])
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", buddy.display()))?;
    let pid = child
        .id()
        .ok_or("buddy run exited before it could be measured")?;
    let output = child.wait_with_output();
    tokio::pin!(output);
    let mut peak = 0;
    let output = loop {
        tokio::select! {
            out = &mut output => break out.map_err(|e| e.to_string())?,
            () = tokio::time::sleep(Duration::from_millis(5)) => {
                peak = peak.max(status_kib(pid, "VmHWM:"));
            }
        }
    };
    let mut text = String::from_utf8_lossy(&output.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&output.stderr));
    Ok(RunPeak {
        peak_kib: peak,
        output: text,
    })
}

/// What the two runs showed: the baseline's peak, the large run's peak (KiB), and why
/// either did not end as it should.
pub(crate) struct RunFigures {
    pub(crate) baseline_kib: u64,
    pub(crate) peak_kib: u64,
    pub(crate) first_error: Option<String>,
}

/// The benchmark through `buddy run` (the binary `measured`, the mock served by
/// `buddy`): the small run first (the baseline), then the large one.
pub(crate) async fn measure_run(
    buddy: &Path,
    measured: &Path,
    path: MemoryPath,
    size: usize,
) -> Result<RunFigures, String> {
    // The baseline: a turn that completes with a 1 KiB argument (on the overflow path a
    // small argument would not overflow).
    let small = prepare(buddy, MemoryPath::Completed, 1024, "run-small")?;
    let baseline = run_once(measured, &small.dir).await?;
    drop(small);
    let large = prepare(buddy, path, size, "run")?;
    let run = run_once(measured, &large.dir).await?;
    drop(large);
    let reason = path.expected_reason();
    let ended = |r: &RunPeak, reason: &str| {
        r.output.contains(&format!("stop: {reason}"))
            || r.output.contains(&format!("error: {reason}"))
    };
    let first_error = [(&baseline, "completed"), (&run, reason)]
        .into_iter()
        .find(|(r, reason)| !ended(r, reason))
        .map(|(r, reason)| {
            let tail: String = r.output.chars().rev().take(600).collect();
            format!(
                "buddy run did not end {reason}: {}",
                tail.chars().rev().collect::<String>()
            )
        });
    Ok(RunFigures {
        baseline_kib: baseline.peak_kib,
        peak_kib: run.peak_kib,
        first_error,
    })
}
