//! What the writer thread runs and answers, as data: an operation ([`Op`]) and where its answer goes ([`Job`]), a
//! new event prepared for the writer ([`Prepared`]), and the answers ([`Answer`]) each caller expects
//! ([`FromAnswer`]). The engine that runs them is in [`writer`](super::writer), the SQL of each in
//! [`transitions`](super::transitions).

use tokio::sync::oneshot;

use crate::model::{Event, EventKey, Guard, NewEvent, SourceName, Status};
use crate::ports::{Claim, Created, GoneOwners, MarkDead, Purged, Replay, Settled, Settlement, StoreError};

/// One write, as data: what the writer runs inside a transaction.
pub(super) enum Op {
    /// Boxed: a create carries its event and its guard, several times any other write.
    Create(Box<Prepared>),
    /// The events of one batched delivery: created together or not at all (one savepoint).
    CreateBatch(Vec<Prepared>),
    Claim {
        key: EventKey,
        owner: String,
        lease: i64,
    },
    Settle {
        key: EventKey,
        owner: String,
        settlement: Settlement,
    },
    Release {
        key: EventKey,
        owner: String,
    },
    MarkDead {
        key: EventKey,
        reason: String,
    },
    MarkNotified(EventKey),
    DeferAlarm {
        key: EventKey,
        until: i64,
    },
    /// The sweeper sent an open event's message again.
    SentAgain {
        key: EventKey,
        status: Status,
        updated_at: i64,
    },
    Replay {
        key: EventKey,
        force: bool,
    },
    /// Ends the leases of owners that are gone: as [`GoneOwners`] says.
    EndLeases(GoneOwners),
    /// Gives back every lease `owner` holds (this process, at shutdown).
    GiveBack {
        owner: String,
    },
    Purge {
        limit: i64,
    },
    SaveCheckpoint {
        source: SourceName,
        body: String,
    },
    /// `PRAGMA data_version` of the write connection: served between transactions, it takes no lock. Only this
    /// connection tells another process's commits apart from this one's.
    DataVersion,
}

/// A new event as the writer stores it, prepared on the caller's thread so that the one writer thread does neither
/// the encoding nor the compression: its kept headers as JSON, and its body as stored.
pub(super) struct Prepared {
    pub(super) event: NewEvent,
    pub(super) headers: String,
    pub(super) body: StoredBody,
    /// What the create looks for among the remembered bodies, where it looks for anything ([`NewEvent::guard`]),
    /// and that key as the table keeps it ([`body_key`](super::rows::body_key)).
    pub(super) guard: Option<(i64, Guard)>,
    /// The worker that claims the event in its create, where it is created ([`Ledger::create_claimed`]).
    ///
    /// [`Ledger::create_claimed`]: crate::ports::Ledger::create_claimed
    pub(super) claim: Option<ClaimOnCreate>,
}

/// A claim taken in a create's own write: the lease's owner and length (ms).
pub(super) struct ClaimOnCreate {
    pub(super) owner: String,
    pub(super) lease: i64,
}

/// A body as the `payloads` table keeps it: the bytes and how they are encoded (`payloads.encoding`).
pub(super) struct StoredBody {
    pub(super) bytes: bytes::Bytes,
    pub(super) encoding: Encoding,
}

/// How a stored body is encoded (`payloads.encoding`, schema version 7; older rows are all `Raw`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Encoding {
    Raw = 0,
    Zstd = 1,
}

impl Encoding {
    pub(super) fn from_column(value: i64) -> Option<Self> {
        match value {
            0 => Some(Self::Raw),
            1 => Some(Self::Zstd),
            _ => None,
        }
    }
}

/// What an operation answers.
pub(super) enum Answer {
    /// A create's outcome, and the record it claimed (with its body) where it was asked to and created it.
    Created(Created, Option<Box<Event>>),
    CreatedBatch(Vec<Created>),
    Claim(Claim),
    Settled(Settled),
    MarkDead(MarkDead),
    Replay(Replay),
    Count(usize),
    Purged(Purged),
    Version(i64),
    Done,
}

/// Where an operation's answer goes.
pub(super) type Reply = oneshot::Sender<Result<Answer, StoreError>>;

/// An operation, and where its answer goes. It runs at the store's clock when the writer takes it.
pub(super) struct Job {
    pub(super) op: Op,
    pub(super) reply: Reply,
}

/// Which [`Answer`] an operation's caller expects.
pub(super) trait FromAnswer: Sized {
    fn from_answer(answer: Answer) -> Option<Self>;
}

macro_rules! from_answer {
    ($($variant:ident => $t:ty),* $(,)?) => {
        $(impl FromAnswer for $t {
            fn from_answer(answer: Answer) -> Option<Self> {
                match answer {
                    Answer::$variant(v) => Some(v),
                    _ => None,
                }
            }
        })*
    };
}

impl FromAnswer for Created {
    fn from_answer(answer: Answer) -> Option<Self> {
        match answer {
            Answer::Created(created, _) => Some(created),
            _ => None,
        }
    }
}

impl FromAnswer for (Created, Option<Event>) {
    fn from_answer(answer: Answer) -> Option<Self> {
        match answer {
            Answer::Created(created, claimed) => Some((created, claimed.map(|e| *e))),
            _ => None,
        }
    }
}

from_answer!(CreatedBatch => Vec<Created>, Claim => Claim, Settled => Settled, MarkDead => MarkDead, Replay => Replay,
    Count => usize, Purged => Purged, Version => i64);

impl FromAnswer for () {
    fn from_answer(_: Answer) -> Option<Self> {
        Some(())
    }
}

/// One batch's answers, as its commit decided them, waiting for the sync that makes that commit durable.
pub(super) type Answers = Vec<(Reply, Result<Answer, StoreError>)>;
