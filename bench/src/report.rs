//! Output helpers: the one-line JSON record with keys in a fixed order, and process stats.

use serde_json::Value;

/// `{"k1":v1,"k2":v2,...}` with the keys in the given order (a `serde_json::Map` would sort
/// them, and the first keys of each record are a fixed contract for the scripts that read it).
pub fn json_line(fields: &[(&str, Value)]) -> String {
    let mut out = String::from("{");
    for (i, (k, v)) in fields.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&Value::from(*k).to_string());
        out.push(':');
        out.push_str(&v.to_string());
    }
    out.push('}');
    out
}

/// Peak RSS divided by the number of simulated nodes (the whole process's memory, simulator
/// queues included, charged to the nodes): `null` when the peak is unknown.
pub fn bytes_per_node(peak_rss: Option<u64>, ranks: u32) -> Value {
    peak_rss.map_or(Value::Null, |b| Value::from(b / u64::from(ranks.max(1))))
}

/// Peak resident set size of this process (`VmHWM` in `/proc/self/status`), if readable.
pub fn peak_rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// The median of `v` (sorts it); `0.0` when empty.
pub fn median(v: &mut [f64]) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_keep_their_order() {
        let s = json_line(&[("b", 1.into()), ("a", 2.5.into()), ("c", Value::Null)]);
        assert_eq!(s, r#"{"b":1,"a":2.5,"c":null}"#);
        let v: Value = serde_json::from_str(&s).unwrap();
        assert_eq!(v["a"], 2.5);
    }

    #[test]
    fn median_of_odd_and_even() {
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&mut [4.0, 1.0, 3.0, 2.0]), 2.5);
        assert_eq!(median(&mut []), 0.0);
    }

    #[test]
    fn peak_rss_is_readable_on_linux() {
        if cfg!(target_os = "linux") {
            assert!(peak_rss_bytes().unwrap() > 0);
        }
    }
}
