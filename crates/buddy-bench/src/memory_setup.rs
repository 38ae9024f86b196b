//! The scratch directory of `buddy bench memory`: a path's scenario, the mock model
//! server serving it and the `buddy.toml` pointing at the mock.

use std::path::Path;

use super::load::spawn;
use crate::memory_path::MemoryPath;

/// A scratch directory holding the path's scenario and `buddy.toml` (the mock at
/// `mock_url`), and the mock model server serving it; removed when dropped.
pub(crate) struct Bench {
    pub(crate) dir: std::path::PathBuf,
    _mock: super::load::Proc,
}

impl Drop for Bench {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Writes the scenario of `path` with arguments of `size` bytes, starts the
/// mock on it and writes the `buddy.toml` that points at it.
pub(crate) fn prepare(
    buddy: &Path,
    path: MemoryPath,
    size: usize,
    tag: &str,
) -> Result<Bench, String> {
    let dir = std::env::temp_dir().join(format!("buddy-memory-{}-{tag}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("scenarios")).map_err(|e| e.to_string())?;
    std::fs::create_dir_all(dir.join("sandbox")).map_err(|e| e.to_string())?;
    std::fs::write(
        dir.join("scenarios/big_arguments.json"),
        path.scenario(size).to_string(),
    )
    .map_err(|e| e.to_string())?;
    let (mock, mock_url) = spawn(
        buddy,
        &[
            "mock-server",
            "--listen",
            "127.0.0.1:0",
            "--scenarios",
            "scenarios",
        ],
        &dir,
    )?;
    let config = super::load::mock_provider(
        &mock_url,
        "scripted:big_arguments",
        "first_byte_timeout_secs = 600\nidle_timeout_secs = 600\n",
    ) + &path.config();
    std::fs::write(dir.join("buddy.toml"), config).map_err(|e| e.to_string())?;
    Ok(Bench { dir, _mock: mock })
}
