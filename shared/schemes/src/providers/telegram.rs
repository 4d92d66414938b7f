//! Telegram Bot API: nothing is signed; `setWebhook`'s `secret_token` comes back as is in
//! `X-Telegram-Bot-Api-Secret-Token`, compared in constant time. The id is the Update's `update_id` (an integer),
//! the type the one field of the Update beside it (`message`, `callback_query`, ...). No handshake; any 2XX.
//! <https://core.telegram.org/bots/api#setwebhook>

use crate::families::{Family, Token};
use crate::providers::{Example, Identify, Preset};
use crate::request::{Identified, Request};
use crate::errors::IdError;
use crate::identity::Identity;

pub(super) fn preset() -> Preset {
    Preset {
        // A text message. `update_id` is an integer, which an id such as `evt_...` cannot be: the time stands in
        // for it, so each sample is a new Update.
        example: Some(Example {
            body: r#"{"update_id":{now},"message":{"message_id":1365,"from":{"id":111111111,"is_bot":false,"first_name":"Ada","language_code":"en"},"chat":{"id":111111111,"first_name":"Ada","type":"private"},"date":{now},"text":"/start hello","entities":[{"offset":0,"length":6,"type":"bot_command"}]}}"#,
            content_type: "application/json",
            headers: &[],
        }),
        ..Preset::new(
            "telegram",
            Family::Token(Token::header("x-telegram-bot-api-secret-token")),
            Identify::Custom(identify),
        )
    }
}

/// `update_id`, and the name of the Update's one optional field that is present.
fn identify(req: &Request) -> Result<Identified, IdError> {
    let update: serde_json::Map<String, serde_json::Value> =
        serde_json::from_slice(req.body).map_err(|_| IdError::MalformedBody)?;
    let event_id = match update.get("update_id") {
        Some(serde_json::Value::Number(n)) => crate::identity::valid_id("json /update_id", n.to_string())?,
        _ => return Err(IdError::Missing("json /update_id".to_owned())),
    };
    let event_type = update.keys().find(|k| *k != "update_id").cloned();
    Ok(Identified::One(Identity { event_id, event_type }))
}
