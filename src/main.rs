//! The `connbench` binary: parse the arguments, run, print any error with its causes.

use clap::Parser;

fn main() {
    let cli = connbench::cli::Cli::parse();
    connbench::report::style::init_from_env();
    let code = match connbench::run(cli) {
        Ok(exit) => exit as i32,
        Err(e) => {
            eprintln!("error: {e:#}");
            connbench::Exit::Usage as i32
        }
    };
    std::process::exit(code);
}
