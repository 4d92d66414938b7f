//! The security layer: the headers of every answer, loopback host names, the token every request then needs.

use super::*;
use crate::guard::is_loopback_host;
use crate::{check_listen, StartError};

#[tokio::test]
async fn every_answer_carries_the_security_headers() {
    let app = spawn(None).await;
    put(&app.ledger, "stripe", "e1", b"{}", Some(Status::Dead)).await;
    for path in [
        "/",
        "/events",
        "/events?status=DEAD",
        "/event?source=stripe&id=e1",
        "/event/raw?source=stripe&id=e1",
        "/replay?status=DEAD",
        "/style.css",
        "/login",
        "/nope",
        "/event?source=stripe&id=missing",
        "/events?status=BOGUS",
    ] {
        assert_secure_headers(&app.get(path).await);
    }
    assert_eq!(app.get("/nope").await.status(), 404);
    assert_eq!(app.get("/event?source=stripe&id=missing").await.status(), 404);
    let bad = app.get("/events?status=BOGUS").await;
    assert_eq!(bad.status(), 400);
    assert!(bad.text().await.unwrap().contains("status"));
    let refused = app.post("/event/replay", None, &[]).await;
    assert_secure_headers(&refused);
    let css = app.get("/style.css").await;
    assert!(css.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/css"));
}

#[tokio::test]
async fn a_loopback_console_answers_only_to_loopback_host_names() {
    let app = spawn(None).await;
    let r = app
        .http
        .get(format!("{}/", app.base))
        .header("host", "rebind.evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    for host in ["localhost:3001", "127.0.0.1", "[::1]:80"] {
        assert!(is_loopback_host(host), "{host}");
    }
}

#[test]
fn a_non_loopback_listener_needs_a_token() {
    let any: SocketAddr = "0.0.0.0:3001".parse().unwrap();
    let local: SocketAddr = "127.0.0.1:3001".parse().unwrap();
    assert!(matches!(
        check_listen(any, None),
        Err(StartError::TokenRequired(_))
    ));
    assert!(check_listen(local, None).is_ok());
    let short = SecretString::from("short");
    assert!(matches!(
        check_listen(any, Some(&short)),
        Err(StartError::WeakToken)
    ));
    let good = SecretString::from("a-long-enough-token");
    assert!(check_listen(any, Some(&good)).is_ok());
}

#[tokio::test]
async fn with_a_token_every_request_needs_it() {
    let app = spawn(Some(TOKEN)).await;
    put(&app.ledger, "stripe", "zz-dead", b"{}", Some(Status::Dead)).await;
    for path in [
        "/",
        "/events",
        "/event?source=stripe&id=zz-dead",
        "/event/raw?source=stripe&id=zz-dead",
        "/replay?status=DEAD",
    ] {
        let r = app.get(path).await;
        assert_eq!(r.status(), 401, "{path}");
        assert_secure_headers(&r);
        let page = r.text().await.unwrap();
        assert!(page.contains("Log in") && !page.contains("zz-dead"), "{path}");
        let wrong = app
            .http
            .get(format!("{}{path}", app.base))
            .bearer_auth("wrong-token-wrong-token")
            .send()
            .await
            .unwrap();
        assert_eq!(wrong.status(), 401, "{path}");
        let right = app
            .http
            .get(format!("{}{path}", app.base))
            .bearer_auth(TOKEN)
            .send()
            .await
            .unwrap();
        assert_eq!(right.status(), 200, "{path}");
    }
    let r = app
        .post(
            "/event/replay",
            Some(&app.origin()),
            &[("source", "stripe"), ("id", "zz-dead")],
        )
        .await;
    assert_eq!(r.status(), 401);
    // The login form: a wrong token is refused, the right one sets a strict, script-proof cookie.
    let login = app.page("/login").await;
    let csrf = csrf_of(&login);
    let origin = app.origin();
    let r = app
        .post("/login", Some(&origin), &[("token", "nope"), ("csrf", &csrf)])
        .await;
    assert_eq!(r.status(), 401);
    assert!(r.headers().get("set-cookie").is_none());
    let r = app
        .post(
            "/login",
            Some("http://evil.example"),
            &[("token", TOKEN), ("csrf", &csrf)],
        )
        .await;
    assert_eq!(r.status(), 403);
    let r = app
        .post("/login", Some(&origin), &[("token", TOKEN), ("csrf", &csrf)])
        .await;
    assert_eq!(r.status(), 303);
    let cookie = r.headers()["set-cookie"].to_str().unwrap().to_owned();
    assert!(
        cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"),
        "{cookie}"
    );
    assert!(!cookie.contains(TOKEN), "the cookie is not the token");
    let session = cookie.split(';').next().unwrap().to_owned();
    let page = app
        .http
        .get(format!("{}/event?source=stripe&id=zz-dead", app.base))
        .header("cookie", &session)
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), 200);
    let page = page.text().await.unwrap();
    let csrf = csrf_of(&page);
    // A forged cookie is no session.
    let forged = app
        .http
        .get(format!("{}/", app.base))
        .header("cookie", "inbox_console=00.00")
        .send()
        .await
        .unwrap();
    assert_eq!(forged.status(), 401);
    // With the session, a replay still needs its CSRF token.
    let post = |csrf: String| {
        app.http
            .post(format!("{}/event/replay", app.base))
            .header("cookie", &session)
            .header("origin", &origin)
            .header("content-type", "application/x-www-form-urlencoded")
            .body(format!("source=stripe&id=zz-dead&csrf={csrf}"))
            .send()
    };
    assert_eq!(post(String::new()).await.unwrap().status(), 403);
    assert_eq!(
        post(console_csrf_of_anonymous(&app).await)
            .await
            .unwrap()
            .status(),
        403
    );
    assert_eq!(post(csrf).await.unwrap().status(), 303);
    assert_eq!(app.status_of("stripe", "zz-dead").await, Status::Received);
}
