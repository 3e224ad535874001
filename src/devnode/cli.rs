//! Placeholder until the devnode lands.

/// `logslice devnode` arguments.
#[derive(Debug, clap::Args)]
pub struct DevnodeArgs {}

/// Serves until cancelled.
///
/// # Errors
/// Never yet.
pub async fn run(
    _args: DevnodeArgs,
    _shutdown: tokio_util::sync::CancellationToken,
) -> Result<(), std::io::Error> {
    todo!()
}
