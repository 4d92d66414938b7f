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

/// `getconf CLK_TCK`, asked once: a `getconf` run between two readings of the children's CPU would count in it.
fn clock_ticks() -> f64 {
    static TICKS: std::sync::OnceLock<f64> = std::sync::OnceLock::new();
    *TICKS.get_or_init(|| {
        std::process::Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|o| String::from_utf8(o.stdout).ok())
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(100.0)
    })
}

/// utime + stime of `pid`, in seconds.
pub fn cpu_seconds(pid: u32) -> Result<f64> {
    stat_seconds(&format!("/proc/{pid}/stat"), 14)
}

/// utime + stime of the threads of `pid` other than its first, in seconds: for wrk, the threads that send the
/// requests, without the main thread's setup (its script builds a Lua state for each thread first).
pub fn threads_cpu_seconds(pid: u32) -> Result<f64> {
    let mut total = 0.0;
    for task in std::fs::read_dir(format!("/proc/{pid}/task"))? {
        let tid: u32 = task?.file_name().to_string_lossy().parse()?;
        if tid != pid {
            // A thread may end between the listing and the read.
            total += stat_seconds(&format!("/proc/{pid}/task/{tid}/stat"), 14).unwrap_or(0.0);
        }
    }
    Ok(total)
}

/// user + system time of this process's children that have ended and been waited for, in seconds.
pub fn children_cpu_seconds() -> Result<f64> {
    stat_seconds("/proc/self/stat", 16)
}

/// The sum of fields `field` and `field + 1` (numbered from 1, as in `proc(5)`) of a `stat` file of /proc, clock
/// ticks in seconds: 14 for utime + stime, 16 for the waited-for children's cutime + cstime.
fn stat_seconds(path: &str, field: usize) -> Result<f64> {
    let stat = std::fs::read_to_string(path)?;
    // The command (field 2) may hold spaces: fields are counted after its closing parenthesis, from field 3.
    let after = &stat[stat.rfind(')').context("stat format")? + 1..];
    let mut fields = after.split_whitespace().skip(field - 3);
    let user: f64 = fields.next().context("stat: no user time")?.parse()?;
    let system: f64 = fields.next().context("stat: no system time")?.parse()?;
    Ok((user + system) / clock_ticks())
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
