//! What /proc says about the machine and about a server process.

use anyhow::{Context, Result};

/// `nproc`, the CPU model and the memory, one line each.
pub fn machine() -> String {
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find_map(|l| {
            l.strip_prefix("model name")
                .map(|r| r.trim_start_matches([' ', '\t', ':']).to_owned())
        })
        .unwrap_or_else(|| "unknown".into());
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let mem_kib: u64 = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|r| r.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0);
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    format!(
        "machine: nproc {cpus}, CPU {model}, memory {:.1} GiB, Linux {}",
        mem_kib as f64 / 1024.0 / 1024.0,
        kernel.trim()
    )
}

fn clock_ticks() -> f64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(100.0)
}

/// utime + stime of `pid`, in seconds.
pub fn cpu_seconds(pid: u32) -> Result<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    let after = &stat[stat.rfind(')').context("stat format")? + 1..];
    let fields: Vec<&str> = after.split_whitespace().collect();
    // After the command: state is field 3, so utime (14) and stime (15) are at 11 and 12.
    let utime: f64 = fields.get(11).context("utime")?.parse()?;
    let stime: f64 = fields.get(12).context("stime")?.parse()?;
    Ok((utime + stime) / clock_ticks())
}

/// user + system time of this process's children that have ended and been waited for, in seconds.
pub fn children_cpu_seconds() -> Result<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat")?;
    let after = &stat[stat.rfind(')').context("stat format")? + 1..];
    let fields: Vec<&str> = after.split_whitespace().collect();
    // cutime (16) and cstime (17).
    let utime: f64 = fields.get(13).context("cutime")?.parse()?;
    let stime: f64 = fields.get(14).context("cstime")?.parse()?;
    Ok((utime + stime) / clock_ticks())
}

/// Peak resident memory (VmHWM) of `pid`, in MiB.
pub fn vm_hwm_mib(pid: u32) -> Result<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let kib: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .context("VmHWM")?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()?;
    Ok(kib / 1024.0)
}
