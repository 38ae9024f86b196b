use buddy_skills::builtin::FileLimits;

use super::{builtins, invoke};

#[tokio::test]
async fn read_write_list_and_search_inside_the_sandbox() {
    let (dir, registry) = builtins(FileLimits::default());
    let out = invoke(
        &registry,
        "write_file",
        r#"{"path":"notes/todo.txt","content":"buy milk\ncall Ada\n"}"#,
    )
    .await;
    assert_eq!(
        (out.content.as_str(), out.is_error),
        ("wrote 18 bytes to notes/todo.txt", false)
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("notes/todo.txt")).unwrap(),
        "buy milk\ncall Ada\n"
    );

    let out = invoke(
        &registry,
        "write_file",
        r#"{"path":"notes/todo.txt","content":"fix bike\n","append":true}"#,
    )
    .await;
    assert!(
        out.content.starts_with("appended 9 bytes"),
        "{}",
        out.content
    );

    let out = invoke(&registry, "read_file", r#"{"path":"notes/todo.txt"}"#).await;
    assert_eq!(out.content, "buy milk\ncall Ada\nfix bike\n");
    let out = invoke(
        &registry,
        "read_file",
        r#"{"path":"notes/todo.txt","start_line":2,"max_lines":1}"#,
    )
    .await;
    assert_eq!(out.content, "call Ada");

    let out = invoke(&registry, "list_dir", r#"{}"#).await;
    assert_eq!(out.content, "notes/");
    let out = invoke(&registry, "list_dir", r#"{"path":"notes"}"#).await;
    assert_eq!(out.content, "todo.txt (27 bytes)");

    let out = invoke(
        &registry,
        "search_files",
        r#"{"query":"ada","ignore_case":true}"#,
    )
    .await;
    assert_eq!(out.content, "notes/todo.txt:2: call Ada");
    let out = invoke(&registry, "search_files", r#"{"query":"zebra"}"#).await;
    assert_eq!(out.content, "no matches for `zebra`");

    let out = invoke(&registry, "get_time", "{}").await;
    assert!(
        out.content.contains("T") && out.content.contains("unix"),
        "{}",
        out.content
    );
}

#[tokio::test]
async fn paths_that_leave_the_sandbox_are_refused() {
    let (_dir, registry) = builtins(FileLimits::default());
    for (tool, args) in [
        ("read_file", r#"{"path":"../../etc/passwd"}"#),
        ("read_file", r#"{"path":"/etc/passwd"}"#),
        ("write_file", r#"{"path":"../escape.txt","content":"x"}"#),
        ("write_file", r#"{"path":"/tmp/escape.txt","content":"x"}"#),
        ("list_dir", r#"{"path":".."}"#),
        ("search_files", r#"{"query":"root","path":"/etc"}"#),
    ] {
        let out = invoke(&registry, tool, args).await;
        assert!(
            out.is_error,
            "{tool} {args} must be refused: {}",
            out.content
        );
        assert!(
            out.content.contains("leaves the sandbox") || out.content.contains("is absolute"),
            "{tool} {args}: {}",
            out.content
        );
    }
}

#[cfg(unix)]
#[tokio::test]
async fn symlinks_pointing_out_are_refused_for_every_file_skill() {
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret.txt"), "top secret").unwrap();
    let (dir, registry) = builtins(FileLimits::default());
    std::os::unix::fs::symlink(
        outside.path().join("secret.txt"),
        dir.path().join("link.txt"),
    )
    .unwrap();
    std::os::unix::fs::symlink(outside.path(), dir.path().join("out")).unwrap();
    for (tool, args) in [
        ("read_file", r#"{"path":"link.txt"}"#),
        ("read_file", r#"{"path":"out/secret.txt"}"#),
        ("write_file", r#"{"path":"link.txt","content":"overwrite"}"#),
        ("write_file", r#"{"path":"out/new.txt","content":"x"}"#),
        ("list_dir", r#"{"path":"out"}"#),
    ] {
        let out = invoke(&registry, tool, args).await;
        assert!(
            out.is_error && out.content.contains("symlink"),
            "{tool} {args}: {}",
            out.content
        );
    }
    assert_eq!(
        std::fs::read_to_string(outside.path().join("secret.txt")).unwrap(),
        "top secret"
    );
    assert!(!outside.path().join("new.txt").exists());
    // search_files never follows symlinks, so the secret is not found through them.
    let out = invoke(&registry, "search_files", r#"{"query":"secret"}"#).await;
    assert_eq!(out.content, "no matches for `secret`");
}

#[tokio::test]
async fn reads_and_listings_are_capped_with_a_clear_note() {
    let limits = FileLimits {
        max_read_bytes: 100,
        max_entries: 3,
        max_matches: 2,
        max_file_bytes: 10_000,
        max_write_bytes: 50,
    };
    let (dir, registry) = builtins(limits);
    std::fs::write(dir.path().join("big.txt"), "line of text\n".repeat(50)).unwrap();
    std::fs::write(dir.path().join("huge.txt"), "y".repeat(20_000)).unwrap();
    std::fs::write(dir.path().join("bin.dat"), [0u8, 1, 2, 3]).unwrap();
    for i in 0..5 {
        std::fs::write(dir.path().join(format!("f{i}.txt")), "match me").unwrap();
    }

    let out = invoke(&registry, "read_file", r#"{"path":"big.txt"}"#).await;
    assert!(
        out.content
            .contains("[truncated: 550 of 650 bytes cut here (lines 4-47)"),
        "{}",
        out.content
    );
    let out = invoke(&registry, "read_file", r#"{"path":"huge.txt"}"#).await;
    assert!(
        out.is_error && out.content.contains("20000 bytes"),
        "{}",
        out.content
    );
    let out = invoke(&registry, "read_file", r#"{"path":"bin.dat"}"#).await;
    assert!(
        out.is_error && out.content.contains("binary"),
        "{}",
        out.content
    );
    let out = invoke(&registry, "list_dir", "{}").await;
    assert!(
        out.content.contains("[truncated: showing 3 of 8 entries"),
        "{}",
        out.content
    );
    let out = invoke(&registry, "search_files", r#"{"query":"match"}"#).await;
    assert!(
        out.content
            .contains("[truncated: showing the first 2 matches"),
        "{}",
        out.content
    );
    let out = invoke(&registry, "search_files", r#"{"query":"no such text"}"#).await;
    assert!(
        out.content
            .contains("1 file(s) over 10000 bytes were not searched"),
        "{}",
        out.content
    );
    let out = invoke(
        &registry,
        "write_file",
        &format!(r#"{{"path":"w.txt","content":"{}"}}"#, "z".repeat(60)),
    )
    .await;
    assert!(
        out.is_error && out.content.contains("at most 50 bytes"),
        "{}",
        out.content
    );
    let out = invoke(&registry, "read_file", r#"{"path":"missing.txt"}"#).await;
    assert!(
        out.is_error && out.content.contains("cannot read `missing.txt`"),
        "{}",
        out.content
    );
    let out = invoke(&registry, "read_file", r#"{"path":"."}"#).await;
    assert!(
        out.is_error && out.content.contains("directory"),
        "{}",
        out.content
    );
}
