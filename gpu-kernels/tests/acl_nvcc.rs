//! cuda/acl.cuh must compile for the GPU (sm_90) with the pinned pip nvcc, not only for
//! the host. Skipped, with a message, where that nvcc is not installed (scripts/install-deps.sh
//! installs it).

use std::path::Path;
use std::process::Command;

#[test]
fn acl_cuh_compiles_for_sm90() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let Some(nv) = Command::new("python3")
        .args(["-c", "import nvidia;print(nvidia.__path__[0])"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| Path::new(String::from_utf8_lossy(&o.stdout).trim()).join("cu13"))
        .filter(|p| p.join("bin/nvcc").exists())
    else {
        // CI installs it (scripts/install-deps.sh): a skip there would hide a broken kernel.
        assert!(
            std::env::var_os("CI").is_none(),
            "pinned pip nvcc (nvidia/cu13/bin/nvcc) not installed and CI is set"
        );
        eprintln!("skipped: pinned pip nvcc (nvidia/cu13/bin/nvcc) not installed");
        return;
    };
    let dir = std::env::temp_dir().join(format!("pw_acl_nvcc_{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let src = dir.join("acl_check.cu");
    std::fs::write(
        &src,
        "#include \"acl.cuh\"\n\
         extern \"C\" __global__ void pw_acl_check(const pw_acl_tables *t, const pw_packet_meta *m,\n\
             uint32_t *out, int n) {\n\
           int i = blockIdx.x * blockDim.x + threadIdx.x;\n\
           if (i >= n) return;\n\
           pw_acl_key k;\n\
           pw_acl_key_from_meta(&m[i], 0, &k);\n\
           uint32_t mark;\n\
           uint32_t r = pw_acl_classify(t, &k);\n\
           out[i] = r == PW_ACL_NO_MATCH ? r : pw_acl_action(t, r, &mark);\n\
         }\n",
    )
    .unwrap();
    let lib = nv.join("lib");
    let ld = format!(
        "{}:{}",
        lib.display(),
        std::env::var("LD_LIBRARY_PATH").unwrap_or_default()
    );
    let out = Command::new(nv.join("bin/nvcc"))
        .env("LD_LIBRARY_PATH", ld)
        .arg("-arch=sm_90")
        .arg("-I")
        .arg(root.join("cuda"))
        .arg("-c")
        .arg(&src)
        .arg("-o")
        .arg(dir.join("acl_check.o"))
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        out.status.success(),
        "nvcc -arch=sm_90 failed on acl.cuh:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
