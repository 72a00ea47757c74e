// Links libfoxhunt_c.so from the installed prefix FOXHUNT_PREFIX (what `cmake --install build
// --prefix P` wrote; default /usr/local). The flags come from the prefix's foxhunt.pc when
// pkg-config is there (an rpath to the library, and -rpath-link to LibTorch's directories, which
// the linker needs to check the library's own dependencies); else lib/ with an rpath, by hand.
use std::env;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=FOXHUNT_PREFIX");
    println!("cargo:rerun-if-changed=build.rs");
    let prefix = env::var("FOXHUNT_PREFIX").unwrap_or_else(|_| "/usr/local".to_string());
    let mut pc_path = format!("{}/lib/pkgconfig", prefix);
    if let Ok(rest) = env::var("PKG_CONFIG_PATH") {
        pc_path = format!("{}:{}", pc_path, rest);
    }
    let pkg = Command::new("pkg-config")
        .args(["--libs", "foxhunt"])
        .env("PKG_CONFIG_PATH", &pc_path)
        .output();
    match pkg {
        Ok(out) if out.status.success() => {
            for flag in String::from_utf8_lossy(&out.stdout).split_whitespace() {
                if let Some(dir) = flag.strip_prefix("-L") {
                    println!("cargo:rustc-link-search=native={}", dir);
                } else if let Some(lib) = flag.strip_prefix("-l") {
                    println!("cargo:rustc-link-lib=dylib={}", lib);
                } else {
                    println!("cargo:rustc-link-arg={}", flag);
                }
            }
        }
        _ => {
            let lib = format!("{}/lib", prefix);
            println!("cargo:rustc-link-search=native={}", lib);
            println!("cargo:rustc-link-lib=dylib=foxhunt_c");
            println!("cargo:rustc-link-arg=-Wl,-rpath,{}", lib);
        }
    }
}
