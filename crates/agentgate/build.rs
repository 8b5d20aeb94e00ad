//! Records what `agentgate --version` reports that Cargo does not know: the
//! commit the binary is built from, and the exact rmcp version it links
//! (from Cargo.lock, for a test that keeps the printed one honest).

use std::path::Path;
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    let text = String::from_utf8(out.stdout).ok()?;
    (out.status.success() && !text.trim().is_empty()).then(|| text.trim().to_owned())
}

fn main() {
    let commit = git(&["rev-parse", "--short=12", "HEAD"]).unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=AGENTGATE_COMMIT={commit}");
    // Built again when HEAD moves: a checkout, or a commit on its branch.
    if let Some(dir) = git(&["rev-parse", "--absolute-git-dir"]) {
        for path in ["HEAD", "refs/heads", "packed-refs"] {
            let path = Path::new(&dir).join(path);
            if path.exists() {
                println!("cargo:rerun-if-changed={}", path.display());
            }
        }
    }
    let lock = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../Cargo.lock");
    println!("cargo:rerun-if-changed={}", lock.display());
    let rmcp = std::fs::read_to_string(&lock)
        .ok()
        .and_then(|text| {
            let at = text.find("name = \"rmcp\"\nversion = \"")?;
            let rest = &text[at + "name = \"rmcp\"\nversion = \"".len()..];
            rest.split('"').next().map(str::to_owned)
        })
        .unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=RMCP_VERSION={rmcp}");
    println!("cargo:rerun-if-changed=build.rs");
}
