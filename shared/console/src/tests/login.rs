//! Logins: the session cookie, idle and lifetime ends, logout on the server, the logout button.

use super::*;

#[tokio::test]
async fn the_session_cookie_is_secure_unless_the_console_is_told_otherwise() {
    let app = spawn(Some(TOKEN)).await;
    let set = log_in(&app).await;
    let attrs: Vec<&str> = set.split(';').map(str::trim).collect();
    for attr in ["HttpOnly", "SameSite=Strict", "Path=/", "Secure", "Max-Age=43200"] {
        assert!(attrs.contains(&attr), "{attr} in {set}");
    }
    // A plain HTTP request to another host is warned that the browser will drop it; one through a TLS proxy is not.
    let login = |host: &'static str, proto: Option<&'static str>| {
        let mut r = app.http.get(format!("{}/login", app.base)).header("host", host);
        if let Some(p) = proto {
            r = r.header("x-forwarded-proto", p);
        }
        async move { r.send().await.unwrap().text().await.unwrap() }
    };
    assert!(login("console.internal:3001", None)
        .await
        .contains("--insecure-cookie"));
    assert!(!login("console.internal", Some("https"))
        .await
        .contains("--insecure-cookie"));
    assert!(!login("127.0.0.1:3001", None).await.contains("--insecure-cookie"));

    // WHEN the console is told the cookie travels over plain HTTP THEN it is not Secure, and nothing warns.
    let plain = spawn_console(Some(TOKEN), |c| {
        c.with_sessions(SessionPolicy {
            secure_cookie: false,
            ..SessionPolicy::default()
        })
    })
    .await;
    let set = log_in(&plain).await;
    assert!(!set.contains("Secure") && set.contains("HttpOnly"), "{set}");
    let r = plain
        .http
        .get(format!("{}/login", plain.base))
        .header("host", "console.internal:3001")
        .send()
        .await
        .unwrap();
    assert!(!r.text().await.unwrap().contains("--insecure-cookie"));
}

#[tokio::test]
async fn an_idle_session_is_refused() {
    let idle = Duration::from_millis(1500);
    let app = spawn_console(Some(TOKEN), |c| {
        c.with_sessions(short(idle, Duration::from_secs(3600)))
    })
    .await;
    let cookie = sent_back(&log_in(&app).await);
    // Used within the idle time, twice over the idle time in all: each use counts.
    for _ in 0..3 {
        assert_eq!(app.get_with("/", &cookie).await.status(), 200);
        tokio::time::sleep(idle / 2).await;
    }
    // WHEN it is left alone longer THEN it is refused, said so, and dropped from the browser.
    tokio::time::sleep(idle + Duration::from_millis(200)).await;
    let r = app.get_with("/", &cookie).await;
    assert_eq!(r.status(), 401);
    let clear = r.headers()["set-cookie"].to_str().unwrap().to_owned();
    assert!(
        clear.starts_with("inbox_console=;") && clear.contains("Max-Age=0"),
        "{clear}"
    );
    assert!(r.text().await.unwrap().contains("Your session has ended"));
    assert_eq!(app.get_with("/events", &cookie).await.status(), 401, "for good");
    // A new login works.
    let again = sent_back(&log_in(&app).await);
    assert_eq!(app.get_with("/", &again).await.status(), 200);
}

#[tokio::test]
async fn a_session_ends_at_its_lifetime_however_busy() {
    let lifetime = Duration::from_secs(2);
    let app = spawn_console(Some(TOKEN), |c| {
        c.with_sessions(short(Duration::from_secs(3600), lifetime))
    })
    .await;
    let logged_in = std::time::Instant::now();
    let cookie = sent_back(&log_in(&app).await);
    let mut served = 0;
    let refused_after = loop {
        let r = app.get_with("/events", &cookie).await;
        let elapsed = logged_in.elapsed();
        if r.status() == 401 {
            break elapsed;
        }
        assert_eq!(r.status(), 200);
        served += 1;
        assert!(elapsed < lifetime * 3, "still served {elapsed:?} after the login");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert!(served >= 3, "served {served} times before the end");
    assert!(refused_after >= lifetime, "refused after {refused_after:?}");
    assert_eq!(app.get_with("/", &cookie).await.status(), 401);
}

#[tokio::test]
async fn logging_out_ends_the_session_on_the_server() {
    let app = spawn(Some(TOKEN)).await;
    put(&app.ledger, "stripe", "d1", b"{}", Some(Status::Dead)).await;
    let cookie = sent_back(&log_in(&app).await);
    let page = app.get_with("/events", &cookie).await.text().await.unwrap();
    assert!(page.contains("action=\"/logout\""), "a logout button");
    let csrf = csrf_of(&page);
    let logout = |csrf: String, origin: &'static str| {
        let (http, url, cookie) = (app.http.clone(), format!("{}/logout", app.base), cookie.clone());
        let origin = if origin.is_empty() {
            app.origin()
        } else {
            origin.to_owned()
        };
        async move {
            http.post(url)
                .header("cookie", cookie)
                .header("origin", origin)
                .header("content-type", "application/x-www-form-urlencoded")
                .body(format!("csrf={csrf}"))
                .send()
                .await
                .unwrap()
        }
    };
    // Without its CSRF token, or from another site, a logout is refused and the session lives on.
    assert_eq!(logout(String::new(), "").await.status(), 403);
    assert_eq!(logout(csrf.clone(), "http://evil.example").await.status(), 403);
    assert_eq!(app.get_with("/", &cookie).await.status(), 200);
    assert_eq!(
        app.get_with("/logout", &cookie).await.status(),
        405,
        "a GET logs nobody out"
    );
    // WHEN the button posts THEN the browser is sent to the login page, told to drop the cookie
    let r = logout(csrf.clone(), "").await;
    assert_eq!(r.status(), 303);
    assert_eq!(r.headers()["location"], "/login");
    let clear = r.headers()["set-cookie"].to_str().unwrap();
    assert!(
        clear.starts_with("inbox_console=;") && clear.contains("Max-Age=0"),
        "{clear}"
    );
    // AND the old cookie, sent anyway (a copy of it), lets nothing in: no page, no replay.
    for path in ["/", "/events", "/event?source=stripe&id=d1"] {
        assert_eq!(app.get_with(path, &cookie).await.status(), 401, "{path}");
    }
    let replay = app
        .http
        .post(format!("{}/event/replay", app.base))
        .header("cookie", &cookie)
        .header("origin", app.origin())
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!("source=stripe&id=d1&csrf={csrf}"))
        .send()
        .await
        .unwrap();
    assert_eq!(replay.status(), 401);
    assert_eq!(app.status_of("stripe", "d1").await, Status::Dead);
}

#[tokio::test]
async fn every_page_of_a_logged_in_session_carries_the_logout_button() {
    let app = spawn(Some(TOKEN)).await;
    put(&app.ledger, "stripe", "d1", b"{}", Some(Status::Dead)).await;
    let cookie = sent_back(&log_in(&app).await);
    for path in [
        "/",
        "/events",
        "/event?source=stripe&id=d1",
        "/replay?status=DEAD",
        "/login",
        "/nope",
        "/events?status=BOGUS",
    ] {
        let page = app.get_with(path, &cookie).await.text().await.unwrap();
        assert!(
            page.contains("<form class=\"logout\" method=\"post\" action=\"/logout\">"),
            "{path}"
        );
    }
    // Nothing to log out of: a loopback console without a token, or a bearer token.
    let open = spawn(None).await;
    assert!(!open.page("/").await.contains("/logout"));
    let bearer = app
        .http
        .get(format!("{}/", app.base))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert!(!bearer.text().await.unwrap().contains("/logout"));
}
