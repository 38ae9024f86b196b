//! Embeds the repository's `scenarios/*.json`, so the scripted models, `buddy demo` and
//! `buddy mock-server` work wherever the binary runs, not only inside the checkout.

use std::error::Error;
use std::path::Path;

fn main() -> Result<(), Box<dyn Error>> {
    let manifest = std::env::var("CARGO_MANIFEST_DIR")?;
    let dir = Path::new(&manifest)
        .join("../../scenarios")
        .canonicalize()?;
    println!("cargo:rerun-if-changed={}", dir.display());
    let mut files: Vec<_> = std::fs::read_dir(&dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    let mut out = String::from(
        "/// The repository's scenarios, embedded at build time: (file name, JSON text).\n\
         pub const BUILTIN_SCENARIOS: &[(&str, &str)] = &[\n",
    );
    for file in &files {
        println!("cargo:rerun-if-changed={}", file.display());
        let name = file
            .file_name()
            .and_then(|n| n.to_str())
            .ok_or("a scenario file name is not UTF-8")?;
        out.push_str(&format!(
            "    ({name:?}, include_str!({:?})),\n",
            file.display().to_string()
        ));
    }
    out.push_str("];\n");
    let target = Path::new(&std::env::var("OUT_DIR")?).join("builtin_scenarios.rs");
    std::fs::write(target, out)?;
    Ok(())
}
