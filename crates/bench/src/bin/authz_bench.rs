//! The cost of one permission check, as every call pays it with `security.authorization` on:
//! the checks a Get (`read_view`) and a Put (`require_write`) make, by a user who holds a
//! table-level grant and by one who holds only family grants, with `--grants` other grants in
//! the server besides (other users, other tables). Reports nanoseconds per check; the check
//! off (`security.authorization = false`) is measured the same way as the floor.
//!
//! `cargo run --release -p cellar-bench --bin authz_bench -- [--checks N] [--grants N]`

use cellar_server::config::SecurityConfig;
use cellar_server::security::acl::{Actions, Permission, Scope};
use cellar_server::security::{Authz, Caller};
use std::hint::black_box;
use std::sync::Arc;
use std::time::Instant;

fn arg(name: &str, default: u64) -> Result<u64, String> {
    let args: Vec<String> = std::env::args().collect();
    match args.iter().position(|a| a == name) {
        None => Ok(default),
        Some(i) => args
            .get(i + 1)
            .ok_or_else(|| format!("{name} needs a value"))?
            .parse()
            .map_err(|_| format!("{name}: not a count")),
    }
}

fn main() -> Result<(), String> {
    if std::env::args().any(|a| a == "-h" || a == "--help") {
        println!("authz_bench [--checks N (1000000)] [--grants N (1000)]");
        return Ok(());
    }
    let checks = arg("--checks", 1_000_000)?;
    let grants = arg("--grants", 1000)?;
    let dir = std::env::temp_dir().join(format!("cellar-authz-bench-{}", std::process::id()));
    let on = SecurityConfig {
        authorization: true,
        ..SecurityConfig::default()
    };
    let authz = Authz::new(&on, Vec::new(), &dir.join("audit.log"))?;
    let off = Authz::new(&SecurityConfig::default(), Vec::new(), &dir.join("off.log"))?;
    let mut list = vec![
        Permission {
            user: "alice".into(),
            scope: Scope::table("usertable"),
            actions: Actions::parse("RW")?,
        },
        Permission {
            user: "bob".into(),
            scope: Scope::family("usertable", b"family"),
            actions: Actions::parse("RW")?,
        },
    ];
    for i in 0..grants {
        list.push(Permission {
            user: format!("user{i}"),
            scope: Scope::table(&format!("table{}", i % 50)),
            actions: Actions::parse("R")?,
        });
    }
    authz.load(list.clone());
    off.load(list);
    let caller = |user: &str| Caller {
        user: Some(Arc::from(user)),
        real_user: None,
        certified: true,
        peer: Some([127, 0, 0, 1].into()),
        protocol: "native",
    };
    println!("{checks} checks each, {grants} other grants in the server");
    println!("| check | user's grant | ns/check |");
    println!("|---|---|---:|");
    for (name, who, a) in [
        ("get (read_view)", "alice", &authz),
        ("get (read_view)", "bob", &authz),
        ("put (require_write)", "alice", &authz),
        ("put (require_write)", "bob", &authz),
        ("get, authorization off", "alice", &off),
    ] {
        let c = caller(who);
        let started = Instant::now();
        for _ in 0..checks {
            if name.starts_with("put") {
                black_box(a.require_write(
                    &c,
                    "usertable",
                    [(&b"family"[..], Some(&b"field0"[..]))],
                    "put",
                ))
                .map_err(|e| e.to_string())?;
            } else {
                black_box(a.read_view(&c, "usertable", "get")).map_err(|e| e.to_string())?;
            }
        }
        let ns = started.elapsed().as_nanos() as f64 / checks as f64;
        let grant = if who == "alice" {
            "table RW"
        } else {
            "family RW"
        };
        println!("| {name} | {grant} | {ns:.0} |");
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
