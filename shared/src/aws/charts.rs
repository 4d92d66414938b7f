//! The operator console's chart on AWS: accepted, completed and dead events per hour over the last day, from the
//! metrics the functions publish as EMF lines (namespace [`emf::NAMESPACE`], the totals without dimensions), read
//! with one `GetMetricData` call. The ledger cannot say it without scanning the table: DynamoDB has no index by time.

use async_trait::async_trait;
use aws_sdk_cloudwatch::primitives::DateTime;
use aws_sdk_cloudwatch::types::{Metric, MetricDataQuery, MetricStat};

use super::emf;
use crate::ports::{Bucket, StoreError, Timeline};

const HOUR_MS: i64 = 3_600_000;
const HOURS: i64 = 24;

/// The chart's source: the functions' CloudWatch metrics.
pub struct CloudWatchTimeline {
    client: aws_sdk_cloudwatch::Client,
}

impl CloudWatchTimeline {
    pub fn new(sdk: &aws_config::SdkConfig) -> Self {
        Self {
            client: aws_sdk_cloudwatch::Client::new(sdk),
        }
    }
}

/// Each line of the chart: the query id and the metric it sums.
const LINES: [(&str, &str); 3] = [
    ("accepted", "Accepted"),
    ("completed", "Completed"),
    ("dead", "DeadEvents"),
];

fn query(id: &str, metric: &str) -> MetricDataQuery {
    let stat = MetricStat::builder()
        .metric(
            Metric::builder()
                .namespace(emf::NAMESPACE)
                .metric_name(metric)
                .build(),
        )
        .period(3600)
        .stat("Sum")
        .build();
    MetricDataQuery::builder()
        .id(id)
        .metric_stat(stat)
        .return_data(true)
        .build()
}

#[async_trait]
impl Timeline for CloudWatchTimeline {
    async fn last_day(&self, now: i64) -> Result<Vec<Bucket>, StoreError> {
        // The 24 whole hours that end with the current one.
        let end = (now.div_euclid(HOUR_MS) + 1) * HOUR_MS;
        let start = end - HOURS * HOUR_MS;
        let mut buckets: Vec<Bucket> = (0..HOURS)
            .map(|h| Bucket {
                start: start + h * HOUR_MS,
                ..Bucket::default()
            })
            .collect();
        let mut request = self
            .client
            .get_metric_data()
            .start_time(DateTime::from_millis(start))
            .end_time(DateTime::from_millis(end));
        for (id, metric) in LINES {
            request = request.metric_data_queries(query(id, metric));
        }
        let mut next: Option<String> = None;
        loop {
            let out = request
                .clone()
                .set_next_token(next.take())
                .send()
                .await
                .map_err(|e| {
                    StoreError::Unavailable(format!(
                        "CloudWatch GetMetricData failed: {}",
                        aws_sdk_cloudwatch::error::DisplayErrorContext(e)
                    ))
                })?;
            for result in out.metric_data_results() {
                let points = result.timestamps().iter().zip(result.values());
                for (at, value) in points {
                    let Ok(at) = at.to_millis() else { continue };
                    let Some(bucket) = usize::try_from((at - start).div_euclid(HOUR_MS))
                        .ok()
                        .and_then(|h| buckets.get_mut(h))
                    else {
                        continue;
                    };
                    // Sums of counts: whole numbers.
                    let n = value.max(0.0).round() as u64;
                    match result.id() {
                        Some("accepted") => bucket.accepted += n,
                        Some("completed") => bucket.completed += n,
                        Some("dead") => bucket.dead += n,
                        _ => {}
                    }
                }
            }
            match out.next_token() {
                Some(token) if !token.is_empty() => next = Some(token.to_owned()),
                _ => break,
            }
        }
        Ok(buckets)
    }

    fn note(&self) -> &'static str {
        "each by the hour it was counted, from the functions' CloudWatch metrics"
    }
}
