//! `setpoint debug`: hidden tools that Setpoint's own tests drive as separate processes (to
//! kill them mid-write, for instance). Not a stable interface.

mod crash_value;
mod panics;
mod store_writer;
mod stream_sink;

use anyhow::Result;

use crate::cli::DebugCommand;

/// Runs one `setpoint debug` subcommand.
pub(crate) async fn debug(command: DebugCommand) -> Result<()> {
    match command {
        DebugCommand::StoreWriter(args) => store_writer::store_writer(args).await,
        DebugCommand::Panics(args) => panics::panics(&args),
        DebugCommand::StreamSink(args) => stream_sink::stream_sink(args).await,
    }
}
