//! Prometheus' text exposition format (version 0.0.4): samples gathered by family, so each
//! shard can build its part and shard 0 merges them under one `# HELP`/`# TYPE` per family.

use ferrite_shards::stats::HistogramSnapshot;
use std::collections::BTreeMap;
use std::fmt::Write;

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Kind {
    Counter,
    Gauge,
    Histogram,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
            Kind::Histogram => "histogram",
        }
    }
}

struct Family {
    help: &'static str,
    kind: Kind,
    /// Sample lines, already formatted, without the trailing newline.
    lines: Vec<String>,
}

/// Metric families being built; `Send`, so a shard's part can travel to shard 0.
#[derive(Default)]
pub struct Exposition {
    families: BTreeMap<&'static str, Family>,
}

/// Label pairs of one series.
pub type Labels<'a> = &'a [(&'a str, &'a str)];

impl Exposition {
    /// A `_total` counter.
    pub fn counter(&mut self, name: &'static str, help: &'static str, labels: Labels, value: u64) {
        debug_assert!(name.ends_with("_total"), "{name}: counters end in _total");
        let line = format!("{name}{} {value}", render_labels(labels, None));
        self.family(name, help, Kind::Counter).push(line);
    }

    pub fn gauge(&mut self, name: &'static str, help: &'static str, labels: Labels, value: f64) {
        let line = format!("{name}{} {}", render_labels(labels, None), number(value));
        self.family(name, help, Kind::Gauge).push(line);
    }

    pub fn histogram(
        &mut self,
        name: &'static str,
        help: &'static str,
        labels: Labels,
        h: &HistogramSnapshot,
    ) {
        let lines = self.family(name, help, Kind::Histogram);
        for &(le, count) in &h.cumulative {
            let le = number(le);
            lines.push(format!(
                "{name}_bucket{} {count}",
                render_labels(labels, Some(&le))
            ));
        }
        let plain = render_labels(labels, None);
        lines.push(format!("{name}_sum{plain} {}", number(h.sum_seconds)));
        lines.push(format!("{name}_count{plain} {}", h.count));
    }

    fn family(&mut self, name: &'static str, help: &'static str, kind: Kind) -> &mut Vec<String> {
        let f = self.families.entry(name).or_insert_with(|| Family {
            help,
            kind,
            lines: Vec::new(),
        });
        debug_assert_eq!(f.kind, kind, "{name} is one kind of metric");
        &mut f.lines
    }

    /// Adds another shard's samples.
    pub fn merge(&mut self, other: Exposition) {
        for (name, theirs) in other.families {
            match self.families.get_mut(name) {
                Some(ours) => ours.lines.extend(theirs.lines),
                None => {
                    self.families.insert(name, theirs);
                }
            }
        }
    }

    pub fn render(&self) -> String {
        let mut out = String::new();
        for (name, f) in &self.families {
            let _ = writeln!(out, "# HELP {name} {}", f.help);
            let _ = writeln!(out, "# TYPE {name} {}", f.kind.name());
            for line in &f.lines {
                out.push_str(line);
                out.push('\n');
            }
        }
        out
    }
}

/// `{a="x",b="y"}` (with `le` last for histogram buckets), or nothing without labels.
fn render_labels(labels: Labels, le: Option<&str>) -> String {
    if labels.is_empty() && le.is_none() {
        return String::new();
    }
    let mut out = String::from("{");
    let all = labels.iter().copied().chain(le.map(|v| ("le", v)));
    for (i, (k, v)) in all.enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(k);
        out.push_str("=\"");
        for c in v.chars() {
            match c {
                '\\' => out.push_str("\\\\"),
                '"' => out.push_str("\\\""),
                '\n' => out.push_str("\\n"),
                c => out.push(c),
            }
        }
        out.push('"');
    }
    out.push('}');
    out
}

/// A sample value as Prometheus writes it: integers without a fraction, `+Inf` for infinity.
fn number(v: f64) -> String {
    if v.is_infinite() {
        if v > 0.0 { "+Inf" } else { "-Inf" }.to_string()
    } else if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        format!("{v}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferrite_shards::stats::Histogram;
    use std::time::Duration;

    #[test]
    fn families_merge_under_one_header_and_labels_are_escaped() {
        let mut a = Exposition::default();
        a.counter("x_total", "Xs.", &[("shard", "0")], 3);
        let mut b = Exposition::default();
        b.counter("x_total", "Xs.", &[("shard", "1")], 4);
        b.gauge("g", "A gauge.", &[("topic", "a\"b\\c")], 1.5);
        a.merge(b);
        let text = a.render();
        assert_eq!(
            text,
            "# HELP g A gauge.\n# TYPE g gauge\ng{topic=\"a\\\"b\\\\c\"} 1.5\n\
             # HELP x_total Xs.\n# TYPE x_total counter\nx_total{shard=\"0\"} 3\nx_total{shard=\"1\"} 4\n"
        );
    }

    #[test]
    fn histograms_have_cumulative_buckets_sum_and_count() {
        let h = Histogram::default();
        h.observe(Duration::from_millis(2));
        let mut e = Exposition::default();
        e.histogram("d_seconds", "D.", &[("api", "Produce")], &h.snapshot());
        let text = e.render();
        assert!(text.contains("# TYPE d_seconds histogram\n"), "{text}");
        assert!(
            text.contains("d_seconds_bucket{api=\"Produce\",le=\"0.001\"} 0\n"),
            "{text}"
        );
        assert!(
            text.contains("d_seconds_bucket{api=\"Produce\",le=\"0.0025\"} 1\n"),
            "{text}"
        );
        assert!(
            text.contains("d_seconds_bucket{api=\"Produce\",le=\"+Inf\"} 1\n"),
            "{text}"
        );
        assert!(
            text.contains("d_seconds_count{api=\"Produce\"} 1\n"),
            "{text}"
        );
        assert!(
            text.contains("d_seconds_sum{api=\"Produce\"} 0.002"),
            "{text}"
        );
    }
}
