//! A safe Rust wrapper over foxhunt's C ABI (include/foxhunt/foxhunt.h), with the `extern "C"`
//! declarations written by hand from the header. Errors become `Result<_, Error>` (the status
//! class and the library's message); a `Desk` closes its handle when dropped.

use std::ffi::{CStr, CString};
use std::fmt;
use std::os::raw::c_char;
use std::ptr::{self, NonNull};

/// The ABI this file declares (FOXHUNT_ABI_VERSION of the header it was written from).
pub const ABI_VERSION: i32 = 1;

/// The header's declarations, one for one (`foxhunt_status` is a C enum: an `i32`).
mod ffi {
    use std::os::raw::c_char;

    pub const OK: i32 = 0;
    pub const DESK_SERIES: i32 = 0;
    pub const DESK_PANEL: i32 = 1;

    #[repr(C)]
    pub struct Desk {
        _opaque: [u8; 0],
    }

    #[repr(C)]
    pub struct DeskOptions {
        pub size: usize,
        pub device: *const c_char,
        pub rule_file: *const c_char,
        pub symbol: *const c_char,
        pub mode: i32,
        pub threads: i32,
        pub serial: i32,
    }

    /// `foxhunt_bar`: its first six fields are `Ohlcv`'s, in the same order (repr(C) nests
    /// them at the same offsets).
    #[repr(C)]
    pub struct Bar {
        pub values: super::Ohlcv,
        pub symbol: *const c_char,
    }

    #[repr(C)]
    #[derive(Default)]
    pub struct Decision {
        pub timestamp: i64,
        pub decision: f64,
        pub position: f64,
        pub latency_us: f64,
        pub ready: i32,
        pub models_ready: i32,
    }

    extern "C" {
        pub fn foxhunt_version() -> *const c_char;
        pub fn foxhunt_check_abi(header_abi_version: i32) -> i32;
        pub fn foxhunt_last_error() -> *const c_char;
        pub fn foxhunt_status_name(status: i32) -> *const c_char;
        pub fn foxhunt_desk_options_init(options: *mut DeskOptions);
        pub fn foxhunt_desk_open(
            bundle_dir: *const c_char,
            options: *const DeskOptions,
            out: *mut *mut Desk,
        ) -> i32;
        pub fn foxhunt_desk_close(desk: *mut Desk);
        pub fn foxhunt_desk_push_bars(desk: *mut Desk, bars: *const Bar, n: usize) -> i32;
        pub fn foxhunt_desk_decision(
            desk: *const Desk,
            symbol: *const c_char,
            out: *mut Decision,
        ) -> i32;
        pub fn foxhunt_desk_model_count(desk: *const Desk, out: *mut usize) -> i32;
        pub fn foxhunt_desk_model_name(
            desk: *const Desk,
            index: usize,
            out: *mut *const c_char,
        ) -> i32;
        pub fn foxhunt_desk_signals(
            desk: *const Desk,
            symbol: *const c_char,
            out: *mut f64,
            capacity: usize,
            count: *mut usize,
        ) -> i32;
        pub fn foxhunt_plan_json(request_json: *const c_char, out: *mut *mut c_char) -> i32;
        pub fn foxhunt_budget_json(request_json: *const c_char, out: *mut *mut c_char) -> i32;
        pub fn foxhunt_free_string(s: *mut c_char);
    }
}

/// A failed call: its status class (2 bad input, 1 failed, 3 out of memory) and the library's
/// message ("[component] what was expected, what was received, where").
#[derive(Debug, Clone)]
pub struct Error {
    pub status: i32,
    pub message: String,
}

impl Error {
    /// "input", "failed" or "out of memory".
    pub fn class(&self) -> String {
        // SAFETY: a static string for any value.
        unsafe { text(ffi::foxhunt_status_name(self.status)) }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.message, self.class())
    }
}

impl std::error::Error for Error {}

/// A string the library owns, copied.
unsafe fn text(p: *const c_char) -> String {
    if p.is_null() {
        String::new()
    } else {
        CStr::from_ptr(p).to_string_lossy().into_owned()
    }
}

/// Ok, or the thread's last error (read at once, before any other call on this thread).
fn check(status: i32) -> Result<(), Error> {
    if status == ffi::OK {
        return Ok(());
    }
    // SAFETY: valid until this thread's next foxhunt call; copied here.
    let message = unsafe { text(ffi::foxhunt_last_error()) };
    Err(Error { status, message })
}

/// A Rust string as a C string (an interior NUL is bad input, status 2).
fn c_string(s: &str, what: &str) -> Result<CString, Error> {
    CString::new(s).map_err(|_| Error {
        status: 2,
        message: format!(
            "[rust] {}: expected a string without NUL bytes, got {:?}",
            what, s
        ),
    })
}

/// The library's version.
pub fn version() -> String {
    // SAFETY: a static string.
    unsafe { text(ffi::foxhunt_version()) }
}

/// Refuses a library that implements another ABI than these declarations.
pub fn check_abi() -> Result<(), Error> {
    // SAFETY: plain value.
    check(unsafe { ffi::foxhunt_check_abi(ABI_VERSION) })
}

/// How to open a desk (foxhunt_desk_options).
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// "cpu" (None: the same), "cuda" or "cuda:N".
    pub device: Option<String>,
    /// Decision rule JSON file; None: DIR/rule.json, else the built-in rule.
    pub rule_file: Option<String>,
    /// A series desk over bundles trained on a panel: the instrument served.
    pub symbol: Option<String>,
    /// Many instruments, each timestamp's bars batched (FOXHUNT_DESK_PANEL); else one series.
    pub panel: bool,
    /// LibTorch's intra-op threads (0 keeps the process's setting).
    pub threads: i32,
    /// Run the models one by one.
    pub serial: bool,
}

/// A bar's time (Unix seconds) and values: the C ABI's `foxhunt_bar` without its symbol.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Ohlcv {
    pub timestamp: i64,
    pub open: f64,
    pub high: f64,
    pub low: f64,
    pub close: f64,
    pub volume: f64,
}

/// One bar; `symbol` names the instrument on a panel desk (ignored by a series desk).
#[derive(Debug, Clone, PartialEq)]
pub struct Bar {
    pub values: Ohlcv,
    pub symbol: Option<String>,
}

/// An instrument's decision on its latest bar.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Decision {
    pub timestamp: i64,
    /// Target position in [-1, 1].
    pub decision: f64,
    /// Position held into this bar (the previous decision).
    pub position: f64,
    pub latency_us: f64,
    /// Every model past its warm-up.
    pub ready: bool,
    pub models_ready: i32,
}

/// An open desk (foxhunt_desk): closed on drop. Movable to another thread, not shared: the
/// library wants one thread at a time on a handle.
pub struct Desk {
    raw: NonNull<ffi::Desk>,
    models: Vec<String>,
}

// SAFETY: a handle may move between threads; `&mut self` on the pushes and no `Sync` keep calls
// on one handle from overlapping.
unsafe impl Send for Desk {}

impl Desk {
    /// Opens the bundles `foxhunt train all --out DIR` wrote.
    pub fn open(bundle_dir: &str, options: &Options) -> Result<Desk, Error> {
        let dir = c_string(bundle_dir, "bundle_dir")?;
        let opt = |s: &Option<String>, what: &str| -> Result<Option<CString>, Error> {
            match s {
                Some(v) => Ok(Some(c_string(v, what)?)),
                None => Ok(None),
            }
        };
        let device = opt(&options.device, "device")?;
        let rule_file = opt(&options.rule_file, "rule_file")?;
        let symbol = opt(&options.symbol, "symbol")?;
        let ptr_of = |c: &Option<CString>| c.as_ref().map_or(ptr::null(), |c| c.as_ptr());
        let mut o = ffi::DeskOptions {
            size: 0,
            device: ptr::null(),
            rule_file: ptr::null(),
            symbol: ptr::null(),
            mode: 0,
            threads: 0,
            serial: 0,
        };
        // SAFETY: `o` is a valid struct of the header's layout; every string outlives the call.
        unsafe { ffi::foxhunt_desk_options_init(&mut o) };
        o.device = ptr_of(&device);
        o.rule_file = ptr_of(&rule_file);
        o.symbol = ptr_of(&symbol);
        o.mode = if options.panel {
            ffi::DESK_PANEL
        } else {
            ffi::DESK_SERIES
        };
        o.threads = options.threads;
        o.serial = options.serial as i32;
        let mut raw: *mut ffi::Desk = ptr::null_mut();
        check(unsafe { ffi::foxhunt_desk_open(dir.as_ptr(), &o, &mut raw) })?;
        let raw = NonNull::new(raw).ok_or_else(|| Error {
            status: 1,
            message: "[rust] foxhunt_desk_open succeeded without a handle".to_string(),
        })?;
        let mut desk = Desk {
            raw,
            models: Vec::new(),
        };
        let mut count = 0usize;
        check(unsafe { ffi::foxhunt_desk_model_count(desk.raw.as_ptr(), &mut count) })?;
        for i in 0..count {
            let mut name: *const c_char = ptr::null();
            check(unsafe { ffi::foxhunt_desk_model_name(desk.raw.as_ptr(), i, &mut name) })?;
            desk.models.push(unsafe { text(name) });
        }
        Ok(desk)
    }

    /// The served models, in the order of `signals`.
    pub fn models(&self) -> &[String] {
        &self.models
    }

    /// Feeds one bar.
    pub fn push_bar(&mut self, bar: &Bar) -> Result<(), Error> {
        self.push_bars(std::slice::from_ref(bar))
    }

    /// Feeds the bars of one timestamp (a panel desk; a series desk takes one).
    pub fn push_bars(&mut self, bars: &[Bar]) -> Result<(), Error> {
        let mut symbols = Vec::with_capacity(bars.len());
        for b in bars {
            symbols.push(match &b.symbol {
                Some(s) => Some(c_string(s, "symbol")?),
                None => None,
            });
        }
        let raw: Vec<ffi::Bar> = bars
            .iter()
            .zip(&symbols)
            .map(|(b, s)| ffi::Bar {
                values: b.values,
                symbol: s.as_ref().map_or(ptr::null(), |c| c.as_ptr()),
            })
            .collect();
        // SAFETY: `raw` and the symbols it points to outlive the call; the library copies them.
        check(unsafe { ffi::foxhunt_desk_push_bars(self.raw.as_ptr(), raw.as_ptr(), raw.len()) })
    }

    /// The decision on `symbol`'s latest bar (None on a series desk).
    pub fn decision(&self, symbol: Option<&str>) -> Result<Decision, Error> {
        let s = match symbol {
            Some(v) => Some(c_string(v, "symbol")?),
            None => None,
        };
        let mut d = ffi::Decision::default();
        check(unsafe {
            ffi::foxhunt_desk_decision(
                self.raw.as_ptr(),
                s.as_ref().map_or(ptr::null(), |c| c.as_ptr()),
                &mut d,
            )
        })?;
        Ok(Decision {
            timestamp: d.timestamp,
            decision: d.decision,
            position: d.position,
            latency_us: d.latency_us,
            ready: d.ready != 0,
            models_ready: d.models_ready,
        })
    }

    /// Each model's signal on `symbol`'s latest bar; None for a model still warming up.
    pub fn signals(&self, symbol: Option<&str>) -> Result<Vec<Option<f64>>, Error> {
        let s = match symbol {
            Some(v) => Some(c_string(v, "symbol")?),
            None => None,
        };
        let mut out = vec![0.0f64; self.models.len()];
        let mut count = 0usize;
        check(unsafe {
            ffi::foxhunt_desk_signals(
                self.raw.as_ptr(),
                s.as_ref().map_or(ptr::null(), |c| c.as_ptr()),
                out.as_mut_ptr(),
                out.len(),
                &mut count,
            )
        })?;
        out.truncate(count);
        Ok(out
            .into_iter()
            .map(|v| if v.is_nan() { None } else { Some(v) })
            .collect())
    }
}

impl Drop for Desk {
    fn drop(&mut self) {
        // SAFETY: the handle came from foxhunt_desk_open and is closed once, here.
        unsafe { ffi::foxhunt_desk_close(self.raw.as_ptr()) }
    }
}

/// Calls a `char** out` function and copies its JSON out (freed with foxhunt_free_string).
fn json_call(
    f: unsafe extern "C" fn(*const c_char, *mut *mut c_char) -> i32,
    request: &str,
) -> Result<String, Error> {
    let req = c_string(request, "request_json")?;
    let mut out: *mut c_char = ptr::null_mut();
    check(unsafe { f(req.as_ptr(), &mut out) })?;
    // SAFETY: a NUL-terminated string the library allocated for us; freed once after the copy.
    let s = unsafe { text(out) };
    unsafe { ffi::foxhunt_free_string(out) };
    Ok(s)
}

/// The largest training batch that fits a budget (`foxhunt plan --json`); see the header.
pub fn plan_json(request: &str) -> Result<String, Error> {
    json_call(ffi::foxhunt_plan_json, request)
}

/// The memory budget of every model, and of a desk with "instruments" (`foxhunt budget
/// --json`); see the header.
pub fn budget_json(request: &str) -> Result<String, Error> {
    json_call(ffi::foxhunt_budget_json, request)
}
