//! stream: a bars CSV through trained bundles, one decision per bar, the Rust twin of
//! examples/c/stream.c (same input, same output, numbers with 17 significant digits).
//!
//!   FOXHUNT_PREFIX=/opt/foxhunt cargo build --offline --release
//!   target/release/stream BUNDLE_DIR BARS_CSV [RULE_JSON]
//!
//! Without a symbol column the CSV is one series, fed bar by bar; with one it is a panel, fed one
//! timestamp at a time (each timestamp's bars in one call, in the byte order of their symbols),
//! as `foxhunt predict` feeds it. Exit status: the failed call's status (2 bad input, 1 failed,
//! 3 out of memory) with the library's message on stderr.

use foxhunt::{Bar, Desk, Error, Ohlcv, Options};
use std::process::exit;

const COLUMNS: [&str; 7] = [
    "timestamp",
    "open",
    "high",
    "low",
    "close",
    "volume",
    "symbol",
];

fn input_error(message: String) -> Error {
    Error { status: 2, message }
}

/// Every bar of the CSV, and whether it is a panel (a symbol column).
fn read_csv(path: &str) -> Result<(Vec<Bar>, bool), Error> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| input_error(format!("cannot open the bars CSV {}: {}", path, e)))?;
    let mut lines = text.lines().enumerate();
    let header = match lines.next() {
        Some((_, h)) => h,
        None => return Err(input_error(format!("empty bars CSV {}", path))),
    };
    let names: Vec<&str> = header.trim_end_matches('\r').split(',').collect();
    let col: Vec<Option<usize>> = COLUMNS
        .iter()
        .map(|c| names.iter().position(|n| n == c))
        .collect();
    if col[0].is_none() || col[4].is_none() {
        return Err(input_error(format!(
            "expected a header with timestamp and close columns in {}",
            path
        )));
    }
    let panel = col[6].is_some();
    let mut bars = Vec::new();
    for (i, line) in lines {
        let line = line.trim_end_matches('\r');
        if line.is_empty() {
            continue;
        }
        let fields: Vec<&str> = line.split(',').collect();
        let field = |k: usize| -> Result<Option<&str>, Error> {
            match col[k] {
                None => Ok(None),
                Some(c) => fields.get(c).map(|f| Some(*f)).ok_or_else(|| {
                    input_error(format!(
                        "{}:{}: expected a {} column, got {} fields",
                        path,
                        i + 1,
                        COLUMNS[k],
                        fields.len()
                    ))
                }),
            }
        };
        let number = |k: usize| -> Result<Option<f64>, Error> {
            match field(k)? {
                None => Ok(None),
                Some(f) => f.parse::<f64>().map(Some).map_err(|_| {
                    input_error(format!("line {}: expected a number, got '{}'", i + 1, f))
                }),
            }
        };
        let ts = field(0)?.unwrap_or("");
        let timestamp = ts.parse::<i64>().map_err(|_| {
            input_error(format!(
                "line {}: expected Unix seconds, got '{}'",
                i + 1,
                ts
            ))
        })?;
        let close = number(4)?.unwrap_or(0.0);
        bars.push(Bar {
            values: Ohlcv {
                timestamp,
                open: number(1)?.unwrap_or(close),
                high: number(2)?.unwrap_or(close),
                low: number(3)?.unwrap_or(close),
                close,
                volume: number(5)?.unwrap_or(0.0),
            },
            symbol: field(6)?.map(|s| s.to_string()),
        });
    }
    Ok((bars, panel))
}

/// 17 significant digits (the C example's %.17g reads back to the same double), "null" for a
/// model still warming up.
fn number(v: Option<f64>) -> String {
    match v {
        Some(x) => format!("{:.16e}", x),
        None => "null".to_string(),
    }
}

fn print_decision(desk: &Desk, symbol: Option<&str>) -> Result<(), Error> {
    let d = desk.decision(symbol)?;
    let mut line = format!(
        "{},{},{},{}",
        d.timestamp,
        symbol.unwrap_or("-"),
        number(Some(d.decision)),
        number(Some(d.position))
    );
    for s in desk.signals(symbol)? {
        line.push(',');
        line.push_str(&number(s));
    }
    println!("{}", line);
    Ok(())
}

fn run(args: &[String]) -> Result<(), Error> {
    foxhunt::check_abi()?;
    let (mut bars, panel) = read_csv(&args[2])?;
    let options = Options {
        rule_file: args.get(3).cloned(),
        panel,
        ..Options::default()
    };
    let mut desk = Desk::open(&args[1], &options)?;
    println!(
        "timestamp,symbol,decision,position,{}",
        desk.models().join(",")
    );
    if !panel {
        for bar in &bars {
            desk.push_bar(bar)?;
            print_decision(&desk, None)?;
        }
        return Ok(());
    }
    // Panel order: by timestamp, then by the symbol's bytes (String's order).
    bars.sort_by(|a, b| (a.values.timestamp, &a.symbol).cmp(&(b.values.timestamp, &b.symbol)));
    for group in bars.chunk_by_timestamp() {
        desk.push_bars(group)?;
        for bar in group {
            print_decision(&desk, bar.symbol.as_deref())?;
        }
    }
    Ok(())
}

/// Consecutive runs of bars with one timestamp.
trait ChunkByTimestamp {
    fn chunk_by_timestamp(&self) -> Vec<&[Bar]>;
}

impl ChunkByTimestamp for Vec<Bar> {
    fn chunk_by_timestamp(&self) -> Vec<&[Bar]> {
        let mut out = Vec::new();
        let mut start = 0;
        for i in 1..=self.len() {
            if i == self.len() || self[i].values.timestamp != self[start].values.timestamp {
                out.push(&self[start..i]);
                start = i;
            }
        }
        out
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 3 || args.len() > 4 {
        eprintln!("usage: {} BUNDLE_DIR BARS_CSV [RULE_JSON]", args[0]);
        exit(2);
    }
    if let Err(e) = run(&args) {
        eprintln!("stream: {}", e);
        exit(e.status);
    }
}
