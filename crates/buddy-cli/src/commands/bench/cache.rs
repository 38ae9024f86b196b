//! `buddy bench cache`: the share of a turn's input the provider's prompt cache bills at
//! cache prices, and the billed cost against no cache (see `bench::cache`).

use clap::Args;

use buddy_bench::cache::{run_all, targets};

/// `buddy bench cache`.
#[derive(Args, Debug)]
pub struct CacheArgs {
    /// The report as JSON lines (one object per row) instead of a table.
    #[arg(long)]
    json: bool,
}

/// Runs the benchmark; exit code 1 when a target is missed.
pub async fn run(args: CacheArgs) -> anyhow::Result<u8> {
    let rows = run_all().await?;
    if args.json {
        for row in &rows {
            println!("{}", serde_json::to_string(row)?);
        }
    } else {
        println!(
            "{:<10} {:<22} {:>5} {:>5} {:>9} {:>7} {:>7} {:>8} {:>8} {:>10} {:>10} {:>10} {:>5} {:>4}",
            "api",
            "workload",
            "cache",
            "calls",
            "input",
            "read%",
            "write%",
            "in-bill%",
            "all-bill%",
            "billed $",
            "uncached $",
            "buddy $",
            "last%",
            "keys"
        );
        for r in &rows {
            let pct = |n: u64| 100.0 * n as f64 / (r.input_tokens.max(1)) as f64;
            println!(
                "{:<10} {:<22} {:>5} {:>5} {:>9} {:>6.1}% {:>6.1}% {:>7.1}% {:>8.1}% {:>10.4} {:>10.4} {:>10.4} {:>4.0}% {:>4}",
                format!("{:?}", r.api).to_lowercase(),
                r.workload,
                if r.cache { "on" } else { "off" },
                r.model_calls,
                r.input_tokens,
                pct(r.read_tokens),
                pct(r.written_tokens),
                100.0 * r.input_share,
                100.0 * r.cost_share,
                r.billed_usd,
                r.uncached_usd,
                r.buddy_usd,
                100.0 * r.last_call_read_share,
                r.cache_keys,
            );
        }
    }
    let mut met = true;
    for (target, ok) in targets(&rows) {
        met &= ok;
        eprintln!("{} {target}", if ok { "met   " } else { "MISSED" });
    }
    Ok(u8::from(!met))
}
