//! The node's durable files in its data dir. Each write is whole and atomic: a temporary
//! file, fsync, rename over the old one, fsync of the directory. A crash leaves either the
//! old file or the new one, never half of one.

use serde_json::Value;
use std::fs::{self, File};
use std::io::Write;
use std::path::Path;

pub const ROSTER: &str = "a2a-agents.json";           // W-ROS: the bench may delete it
pub const LEDGER: &str = "a2a-inbound-ledger.json";   // W-LED-3
pub const TASKS: &str = "rust-node-tasks.json";       // W-TASK-6
pub const RELAY: &str = "rust-node-relay.json";       // W-REL-2: seqs survive a restart

pub fn write(dir: &Path, name: &str, doc: &Value) {
    let tmp = dir.join(format!("{name}.tmp"));
    let result = (|| -> std::io::Result<()> {
        let mut f = File::create(&tmp)?;
        f.write_all(serde_json::to_string(doc).expect("JSON").as_bytes())?;
        f.sync_all()?;
        fs::rename(&tmp, dir.join(name))?;
        File::open(dir)?.sync_all()
    })();
    if let Err(e) = result {
        // nothing else is safe: a node that cannot make its state durable must not ack
        eprintln!("a2a-rust-node: cannot write {}: {e}", dir.join(name).display());
        std::process::exit(70);
    }
}

/// The document, None when there is none, or why it cannot be read.
pub fn read_result(dir: &Path, name: &str) -> Result<Option<Value>, String> {
    match fs::read(dir.join(name)) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!("{name}: {e}")),
        Ok(bytes) => serde_json::from_slice(&bytes).map(Some).map_err(|e| format!("{name}: {e}")),
    }
}

pub fn read(dir: &Path, name: &str) -> Option<Value> {
    read_result(dir, name).ok().flatten()
}
