//! The embedded cuda/ library is this checkout's, as it is now: the test reads the files at run
//! time (cargo runs it in the package's folder), so a build served from another checkout's
//! build-script output (a target dir shared between git worktrees) fails here.

#[test]
fn every_embedded_cuda_file_is_this_checkouts_current_file() {
    let mut on_disk: Vec<String> = std::fs::read_dir("cuda")
        .expect("cuda/ (cargo runs tests in the package folder)")
        .flatten()
        .filter(|e| e.path().is_file())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    on_disk.sort();
    let mut embedded: Vec<&str> = pktwarp_kernels::library_files().collect();
    embedded.sort();
    assert_eq!(embedded, on_disk, "embedded cuda/ files vs this checkout's");
    for name in on_disk {
        let disk = std::fs::read_to_string(format!("cuda/{name}")).expect("read cuda file");
        let emb = pktwarp_kernels::library_file(&name).expect("embedded");
        assert!(
            emb == disk,
            "cuda/{name}: the embedded text is not this checkout's current file (stale build-script output?)"
        );
    }
}
