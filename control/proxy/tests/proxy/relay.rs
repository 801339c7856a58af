//! The proxy over real sockets: an allowed CONNECT relays both ways, everything else gets its
//! refusal and never reaches a target; the binary refuses bad flags.

use std::time::Duration;

use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpListener, TcpStream},
};

async fn echo() -> (String, tokio::task::JoinHandle<u32>) {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap().to_string();
    let task = tokio::spawn(async move {
        let mut accepted = 0;
        while let Ok(Ok((mut s, _))) =
            tokio::time::timeout(Duration::from_secs(3), l.accept()).await
        {
            accepted += 1;
            tokio::spawn(async move {
                let mut buf = [0u8; 64];
                while let Ok(n @ 1..) = s.read(&mut buf).await {
                    if s.write_all(&buf[..n]).await.is_err() {
                        break;
                    }
                }
            });
        }
        accepted
    });
    (addr, task)
}

async fn proxy(allow: Vec<liqo_proxy::Target>) -> String {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap().to_string();
    tokio::spawn(liqo_proxy::serve(
        l,
        allow,
        liqo_proxy::DEFAULT_MAX_CONNECTIONS,
    ));
    addr
}

async fn response(s: &mut TcpStream) -> String {
    let mut head = Vec::new();
    let mut b = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        assert_eq!(
            s.read(&mut b).await.unwrap(),
            1,
            "closed mid-response: {head:?}"
        );
        head.push(b[0]);
    }
    String::from_utf8(head).unwrap()
}

#[tokio::test]
async fn allowed_connect_relays_and_the_rest_is_refused() {
    let (target, echoed) = echo().await;
    let allow = vec![format!("kubernetes.default:443={target}").parse().unwrap()];
    let proxy = proxy(allow).await;

    let mut s = TcpStream::connect(&proxy).await.unwrap();
    s.write_all(b"CONNECT kubernetes.default:443 HTTP/1.1\r\nHost: kubernetes.default:443\r\n\r\n")
        .await
        .unwrap();
    assert_eq!(response(&mut s).await, liqo_proxy::ESTABLISHED);
    s.write_all(b"\x16\x03\x01 hello").await.unwrap();
    let mut back = [0u8; 9];
    s.read_exact(&mut back).await.unwrap();
    assert_eq!(&back, b"\x16\x03\x01 hello");
    drop(s);

    for (req, status) in [
        (format!("CONNECT {target} HTTP/1.1\r\n\r\n"), 403),
        ("CONNECT other:443 HTTP/1.1\r\n\r\n".to_owned(), 403),
        (format!("GET http://{target}/ HTTP/1.1\r\n\r\n"), 405),
        ("nonsense\r\n\r\n".to_owned(), 400),
    ] {
        let mut s = TcpStream::connect(&proxy).await.unwrap();
        s.write_all(req.as_bytes()).await.unwrap();
        let r = response(&mut s).await;
        assert!(
            r.starts_with(&format!("HTTP/1.1 {status} ")),
            "{req:?}: {r}"
        );
        let mut rest = Vec::new();
        s.read_to_end(&mut rest).await.unwrap();
        assert!(rest.is_empty(), "closed after a refusal");
    }
    // Only the allowed CONNECT reached the target.
    assert_eq!(echoed.await.unwrap(), 1);
}

#[tokio::test]
async fn an_unreachable_target_is_a_502() {
    // A port nobody listens on (bound, then closed).
    let dead = TcpListener::bind("127.0.0.1:0")
        .await
        .unwrap()
        .local_addr()
        .unwrap();
    let proxy = proxy(vec![format!("api:6443={dead}").parse().unwrap()]).await;
    let mut s = TcpStream::connect(&proxy).await.unwrap();
    s.write_all(b"CONNECT api:6443 HTTP/1.1\r\n\r\n")
        .await
        .unwrap();
    assert!(response(&mut s).await.starts_with("HTTP/1.1 502 "));
}

#[test]
fn the_binary_refuses_bad_flags() {
    let bin = env!("CARGO_BIN_EXE_liqo-proxy");
    let out = std::process::Command::new(bin).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--allow"));
    let out = std::process::Command::new(bin)
        .args(["--allow", "kubernetes.default"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("\"kubernetes.default\" is not host:port"),
        "{err}"
    );
}

#[test]
fn the_binary_refuses_no_connections_and_stops_on_sigterm() {
    let bin = env!("CARGO_BIN_EXE_liqo-proxy");
    let out = std::process::Command::new(bin)
        .args(["--allow", "a:1", "--max-connections", "0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--max-connections"),
        "{out:?}"
    );
    let mut child = std::process::Command::new(bin)
        .args(["--listen", "127.0.0.1:0", "--allow", "a:1"])
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Time to install its handlers (a SIGTERM before that also ends it, by default action).
    std::thread::sleep(std::time::Duration::from_millis(500));
    let kill = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if std::time::Instant::now() > deadline {
            // The test fails below; do not leave the process behind.
            let _ = child.kill();
            panic!("liqo-proxy still running 5 s after SIGTERM");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    // Handled (exit 0), not killed by the signal.
    assert_eq!(status.code(), Some(0), "{status:?}");
}
