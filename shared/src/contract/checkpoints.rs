//! What reconciliation keeps in the store: which ids have a record (in any state, expired or not), read in batches,
//! and each source's checkpoint, beside the events and never among them.

use super::{all, new_event, Harness, LONG};
use crate::model::{EventId, SourceName};
use crate::ports::{Checkpoint, FailedEvent, RunRecord};

/// Which ids are present, in batches (more than one `BatchGetItem` page), and the checkpoint, which no
/// listing sees.
pub async fn reconciliation_reads_presence_in_batches_and_keeps_checkpoints_apart(h: &dyn Harness) {
    let l = h.open(LONG).await;
    for i in (0..250).step_by(2) {
        l.create(new_event(&format!("e{i}"), "b")).await.unwrap();
    }
    let asked: Vec<EventId> = (0..250)
        .map(|i| EventId::parse(&format!("e{i}")).unwrap())
        .collect();
    let source = SourceName::parse("src").unwrap();
    let found = l.present(&source, &asked).await.unwrap();
    assert_eq!(found.len(), 125);
    assert!(found
        .iter()
        .all(|id| id.as_str()[1..].parse::<u32>().unwrap() % 2 == 0));
    assert!(l.present(&source, &[]).await.unwrap().is_empty());
    let other = SourceName::parse("other").unwrap();
    assert!(l.present(&other, &asked).await.unwrap().is_empty());

    assert_eq!(l.checkpoint(&source).await.unwrap(), None);
    let cp = Checkpoint {
        scanned_to: 1_700_000_000_000,
        last_run: Some(RunRecord {
            listed: 3,
            recovered: 1,
            ..Default::default()
        }),
        ..Default::default()
    };
    l.save_checkpoint(&source, &cp).await.unwrap();
    assert_eq!(l.checkpoint(&source).await.unwrap(), Some(cp.clone()));
    let later = Checkpoint {
        scanned_to: cp.scanned_to + 1,
        ..cp
    };
    l.save_checkpoint(&source, &later).await.unwrap();
    assert_eq!(l.checkpoint(&source).await.unwrap(), Some(later));
    assert_eq!(l.checkpoint(&other).await.unwrap(), None);
    assert_eq!(
        l.list(&all(1000)).await.unwrap().len(),
        125,
        "a checkpoint was listed as an event"
    );
}

/// A checkpoint as a release before failed events were kept wrote it reads, keeping none.
pub async fn a_checkpoint_saved_before_failed_events_were_kept_reads_with_none(h: &dyn Harness) {
    let l = h.open(LONG).await;
    let source = SourceName::parse("src").unwrap();
    h.store_checkpoint_json(&source, r#"{"scanned_to":1700000000000,"last_run":null}"#)
        .await;
    let old = l.checkpoint(&source).await.unwrap().unwrap();
    assert_eq!(
        old,
        Checkpoint {
            scanned_to: 1_700_000_000_000,
            last_run: None,
            failed: vec![],
        }
    );
    // Saved again with a failed event, it reads back whole.
    let kept = Checkpoint {
        failed: vec![FailedEvent {
            id: EventId::parse("evt_1").unwrap(),
            handle: "evt_1".into(),
            created_ms: 1_699_999_000_000,
            event_type: Some("charge.refunded".into()),
            attempts: 2,
        }],
        ..old
    };
    l.save_checkpoint(&source, &kept).await.unwrap();
    assert_eq!(l.checkpoint(&source).await.unwrap(), Some(kept));
    assert!(l.list(&all(10)).await.unwrap().is_empty());
}
