//! CloudWatch's side of the delivery-health alarms, for tests: the alarms as `infra/template.yaml` declares them,
//! the metrics CloudWatch Logs extracts from the functions' Embedded Metric Format lines, and the alarm's verdict
//! over one period. The emulator stores no alarm state, so this follows AWS's documentation:
//! - EMF: each metric of a line is published once per dimension set its `Dimensions` lists, the dimension values
//!   read from the line's root (https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/CloudWatch_Embedded_Metric_Format_Specification.html);
//! - a metric alarm compares its statistic over `Period` with `Threshold`; with `TreatMissingData: notBreaching`
//!   a period without data is not breaching; a metric-math alarm evaluates its one `ReturnData` expression over
//!   the `MetricStat`s (`FILL(m, 0)` stands for no data with 0; `IF`, `AND`, comparisons and `+` as documented at
//!   https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/using-metric-math.html).
//!
//! Every alarm here has `EvaluationPeriods: 1`, and a test runs within one period: one sum per metric is the
//! whole of what CloudWatch would see. An alarm that asks for more is refused rather than half evaluated.

use std::collections::{BTreeMap, HashMap};

use serde_json::Value;
use yaml_rust2::{Yaml, YamlLoader};

/// A metric as CloudWatch keys it: namespace, name, and its dimensions (name → value).
pub type MetricKey = (String, String, BTreeMap<String, String>);

/// What the functions published over one period: the sum of each metric.
#[derive(Default, Debug)]
pub struct Published(HashMap<MetricKey, f64>);

impl Published {
    /// Takes in EMF lines as CloudWatch Logs would.
    pub fn add(&mut self, lines: &[String]) {
        for line in lines {
            let v: Value = serde_json::from_str(line).unwrap();
            for directive in v["_aws"]["CloudWatchMetrics"].as_array().unwrap() {
                let namespace = directive["Namespace"].as_str().unwrap();
                for set in directive["Dimensions"].as_array().unwrap() {
                    let dims: BTreeMap<String, String> = set
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|d| {
                            let d = d.as_str().unwrap();
                            (d.to_owned(), v[d].as_str().unwrap().to_owned())
                        })
                        .collect();
                    for metric in directive["Metrics"].as_array().unwrap() {
                        let name = metric["Name"].as_str().unwrap();
                        let value = v[name].as_f64().unwrap();
                        *self
                            .0
                            .entry((namespace.to_owned(), name.to_owned(), dims.clone()))
                            .or_default() += value;
                    }
                }
            }
        }
    }

    fn sum(&self, key: &MetricKey) -> Option<f64> {
        self.0.get(key).copied()
    }
}

/// One `AWS::CloudWatch::Alarm` of the template.
#[derive(Debug)]
pub struct Alarm {
    pub name: String,
    periods: i64,
    rule: Rule,
    threshold: f64,
    comparison: String,
    missing_breaches: bool,
}

#[derive(Debug)]
enum Rule {
    Metric {
        key: MetricKey,
        statistic: String,
    },
    Math {
        expression: String,
        /// Each `MetricStat` by id: its metric and statistic.
        stats: HashMap<String, (MetricKey, String)>,
    },
}

/// The alarms of `infra/template.yaml`, by logical id.
pub fn of_the_template() -> BTreeMap<String, Alarm> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/infra/template.yaml");
    template_alarms(&std::fs::read_to_string(path).unwrap())
}

/// Which of `names` would be in ALARM after a period in which `lines` were all the EMF lines written.
pub fn firing<'a>(alarms: &BTreeMap<String, Alarm>, names: &[&'a str], lines: &[String]) -> Vec<&'a str> {
    let mut published = Published::default();
    published.add(lines);
    names
        .iter()
        .copied()
        .filter(|name| alarms[*name].fires(&published))
        .collect()
}

/// The template's alarms, by logical id.
pub fn template_alarms(template: &str) -> BTreeMap<String, Alarm> {
    let doc = YamlLoader::load_from_str(template).unwrap().remove(0);
    let Yaml::Hash(resources) = &doc["Resources"] else {
        panic!("no Resources")
    };
    let text = |y: &Yaml| y.as_str().map(str::to_owned);
    let number = |y: &Yaml| y.as_f64().or_else(|| y.as_i64().map(|n| n as f64));
    let metric = |m: &Yaml| -> MetricKey {
        let dims = m["Dimensions"]
            .as_vec()
            .map(|ds| {
                ds.iter()
                    .map(|d| (text(&d["Name"]).unwrap(), text(&d["Value"]).unwrap()))
                    .collect()
            })
            .unwrap_or_default();
        (
            text(&m["Namespace"]).unwrap(),
            text(&m["MetricName"]).unwrap(),
            dims,
        )
    };
    let mut alarms = BTreeMap::new();
    for (id, resource) in resources {
        if resource["Type"].as_str() != Some("AWS::CloudWatch::Alarm") {
            continue;
        }
        let name = text(id).unwrap();
        let p = &resource["Properties"];
        let periods = p["EvaluationPeriods"].as_i64().unwrap();
        let rule = match p["Metrics"].as_vec() {
            None => Rule::Metric {
                key: metric(p),
                statistic: text(&p["Statistic"]).unwrap(),
            },
            Some(queries) => {
                let mut expression = None;
                let mut stats = HashMap::new();
                for q in queries {
                    let qid = text(&q["Id"]).unwrap();
                    if let Some(e) = text(&q["Expression"]) {
                        assert_eq!(q["ReturnData"].as_bool(), Some(true), "{name}: {qid}");
                        assert!(expression.replace(e).is_none(), "{name}: two expressions");
                    } else {
                        let stat = &q["MetricStat"];
                        stats.insert(qid, (metric(&stat["Metric"]), text(&stat["Stat"]).unwrap()));
                    }
                }
                Rule::Math {
                    expression: expression.unwrap(),
                    stats,
                }
            }
        };
        let missing = text(&p["TreatMissingData"]).unwrap_or_else(|| "missing".into());
        alarms.insert(
            name.clone(),
            Alarm {
                name,
                periods,
                rule,
                // A number, or a parameter (`!Ref`, loaded as its name) at its default.
                threshold: number(&p["Threshold"])
                    .or_else(|| number(&doc["Parameters"][p["Threshold"].as_str().unwrap()]["Default"]))
                    .unwrap(),
                comparison: text(&p["ComparisonOperator"]).unwrap(),
                missing_breaches: missing == "breaching",
            },
        );
    }
    alarms
}

impl Alarm {
    /// Whether the alarm is in ALARM after a period in which `published` is all that was published.
    pub fn fires(&self, published: &Published) -> bool {
        assert_eq!(
            self.periods, 1,
            "{}: only one-period alarms are evaluated here",
            self.name
        );
        let value = match &self.rule {
            Rule::Metric { key, statistic } => {
                assert_eq!(statistic, "Sum", "{}: only Sum is evaluated here", self.name);
                published.sum(key)
            }
            Rule::Math { expression, stats } => {
                let values: HashMap<&str, Option<f64>> = stats
                    .iter()
                    .map(|(id, (key, stat))| {
                        assert_eq!(stat, "Sum", "{}: only Sum is evaluated here", self.name);
                        (id.as_str(), published.sum(key))
                    })
                    .collect();
                Expr::new(expression, &values).eval()
            }
        };
        let Some(v) = value else {
            return self.missing_breaches;
        };
        match self.comparison.as_str() {
            "GreaterThanThreshold" => v > self.threshold,
            "GreaterThanOrEqualToThreshold" => v >= self.threshold,
            "LessThanThreshold" => v < self.threshold,
            "LessThanOrEqualToThreshold" => v <= self.threshold,
            other => panic!("{}: comparison {other}", self.name),
        }
    }
}

/// The metric-math expressions the template uses: numbers, metric ids, `+`, comparisons (1 or 0), `AND`,
/// `IF(c, a, b)` and `FILL(m, v)`. A value is `None` where a metric had no data.
struct Expr<'a> {
    tokens: Vec<String>,
    at: usize,
    values: &'a HashMap<&'a str, Option<f64>>,
}

impl<'a> Expr<'a> {
    fn new(text: &str, values: &'a HashMap<&'a str, Option<f64>>) -> Self {
        let mut tokens = Vec::new();
        let chars: Vec<char> = text.chars().collect();
        let mut i = 0;
        while i < chars.len() {
            let c = chars[i];
            if c.is_whitespace() {
                i += 1;
            } else if c.is_alphanumeric() || c == '_' || c == '.' {
                let start = i;
                while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_' || chars[i] == '.') {
                    i += 1;
                }
                tokens.push(chars[start..i].iter().collect());
            } else if matches!(c, '>' | '<' | '=') {
                let two = chars.get(i + 1) == Some(&'=');
                tokens.push(chars[i..i + 1 + usize::from(two)].iter().collect());
                i += 1 + usize::from(two);
            } else {
                tokens.push(c.to_string());
                i += 1;
            }
        }
        Self {
            tokens,
            at: 0,
            values,
        }
    }

    fn eval(mut self) -> Option<f64> {
        let v = self.and();
        assert_eq!(self.at, self.tokens.len(), "trailing tokens in {:?}", self.tokens);
        v
    }

    fn peek(&self) -> Option<&str> {
        self.tokens.get(self.at).map(String::as_str)
    }

    fn next(&mut self) -> String {
        self.at += 1;
        self.tokens[self.at - 1].clone()
    }

    fn expect(&mut self, token: &str) {
        assert_eq!(self.next(), token, "in {:?}", self.tokens);
    }

    fn and(&mut self) -> Option<f64> {
        let mut v = self.comparison();
        while self.peek() == Some("AND") {
            self.next();
            let w = self.comparison();
            v = v.zip(w).map(|(a, b)| f64::from(u8::from(a != 0.0 && b != 0.0)));
        }
        v
    }

    fn comparison(&mut self) -> Option<f64> {
        let a = self.sum();
        let op = match self.peek() {
            Some(op @ (">" | ">=" | "<" | "<=" | "==" | "!=")) => op.to_owned(),
            _ => return a,
        };
        self.next();
        let b = self.sum();
        a.zip(b).map(|(a, b)| {
            f64::from(u8::from(match op.as_str() {
                ">" => a > b,
                ">=" => a >= b,
                "<" => a < b,
                "<=" => a <= b,
                "==" => a == b,
                _ => a != b,
            }))
        })
    }

    fn sum(&mut self) -> Option<f64> {
        let mut v = self.atom();
        while self.peek() == Some("+") {
            self.next();
            let w = self.atom();
            v = v.zip(w).map(|(a, b)| a + b);
        }
        v
    }

    fn atom(&mut self) -> Option<f64> {
        let token = self.next();
        match token.as_str() {
            "(" => {
                let v = self.and();
                self.expect(")");
                v
            }
            "IF" => {
                self.expect("(");
                let c = self.and();
                self.expect(",");
                let a = self.and();
                self.expect(",");
                let b = self.and();
                self.expect(")");
                c.and_then(|c| if c != 0.0 { a } else { b })
            }
            "FILL" => {
                self.expect("(");
                let m = self.and();
                self.expect(",");
                let fill = self.and();
                self.expect(")");
                m.or(fill)
            }
            t => match t.parse::<f64>() {
                Ok(n) => Some(n),
                Err(_) => *self
                    .values
                    .get(t)
                    .unwrap_or_else(|| panic!("unknown metric id {t} in {:?}", self.tokens)),
            },
        }
    }
}

#[cfg(test)]
mod evaluator {
    use super::*;

    #[test]
    fn expressions_follow_metric_math() {
        let values: HashMap<&str, Option<f64>> = [("d", Some(25.0)), ("a", None)].into();
        let e = |t: &str| Expr::new(t, &values).eval();
        assert_eq!(
            e("IF(FILL(d, 0) >= 20 AND FILL(d, 0) > FILL(a, 0), 1, 0)"),
            Some(1.0)
        );
        assert_eq!(e("IF(FILL(a, 0) >= 20, 1, 0)"), Some(0.0));
        assert_eq!(e("a + d"), None);
        assert_eq!(e("FILL(a, 0) + d == 25"), Some(1.0));
    }
}
