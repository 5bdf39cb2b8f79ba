//! The flags of `kubernetes`: the manifests of a load's workers (an Indexed Job) and of
//! a suite run in one pod beside the user's sidecar.

use clap::{Args, Subcommand};

use super::parse_run_name;

#[derive(Debug, Subcommand)]
pub enum KubernetesCommand {
    /// Print an Indexed Job whose N pods are the workers of one load run.
    ///
    /// Every pod runs `connbench load TARGET [load flags] --workers N --run RUN --store
    /// STORE` with its index from Kubernetes (JOB_COMPLETION_INDEX); the workers meet in
    /// the PostgreSQL store, start at one agreed instant, and each saves its histograms
    /// there. Passwords come from Secrets (key `password`), never the manifest.
    #[command(after_help = KUBERNETES_EXAMPLES)]
    Job(KubernetesJobArgs),
    /// Print a Job that runs a suite in one pod beside your own sidecar container.
    ///
    /// The question of experiment 1, asked in your cluster: the pod runs `connbench run
    /// SUITE --target NAME=CONNINFO ... --store STORE --run RUN` beside your sidecar (its
    /// image and arguments yours: the Cloud SQL Auth Proxy, PgBouncer, envoy...), the
    /// two sharing an emptyDir at --socket-dir for the sidecar's Unix socket; the suite's
    /// cells reach the sidecar by that socket and by its TCP port on localhost,
    /// interleaved as locally. A suite file travels in a ConfigMap printed before the
    /// Job. Read the answer back with `connbench report RUN --store STORE`.
    #[command(after_help = KUBERNETES_SUITE_EXAMPLES)]
    Suite(KubernetesSuiteArgs),
}

const KUBERNETES_SUITE_EXAMPLES: &str = "\
Experiment 1 beside the Cloud SQL Auth Proxy (docs/guide/sidecar.md):
  connbench kubernetes suite docs/guide/sidecar.toml --image registry.example/connbench:0.1 \\
      --sidecar-image gcr.io/cloud-sql-connectors/cloud-sql-proxy:2.14.0 \\
      --sidecar-arg='PROJECT:REGION:INSTANCE?port=5432' \\
      --sidecar-arg='PROJECT:REGION:INSTANCE?unix-socket=/cloudsql' \\
      --sidecar-port 5432 --socket-dir /cloudsql \\
      --target 'sidecar_unix=host=/cloudsql/PROJECT:REGION:INSTANCE dbname=app user=app' \\
      --target 'sidecar_tcp=host=127.0.0.1 port=5432 dbname=app user=app sslmode=disable' \\
      --target-secret app-db --store postgres://cb@results.prod/connbench --store-secret cb-store \\
      --run sidecar-1 > job.yaml
  kubectl apply -f job.yaml
  kubectl wait --for=condition=complete --timeout=1h job/connbench-sidecar-1
  connbench report sidecar-1 --store postgres://cb@results.prod/connbench";

#[derive(Debug, Args)]
pub struct KubernetesSuiteArgs {
    /// A built-in suite name or a suite file.
    pub suite: String,
    /// The container image with connbench as its entrypoint.
    #[arg(long)]
    pub image: String,
    /// Your sidecar's image.
    #[arg(long, value_name = "IMAGE")]
    pub sidecar_image: String,
    /// One argument of your sidecar's command line (repeat, in order; write
    /// `--sidecar-arg=--flag` for one that starts with a dash).
    #[arg(long = "sidecar-arg", value_name = "ARG", allow_hyphen_values = true)]
    pub sidecar_args: Vec<String>,
    /// The sidecar's TCP port: connbench starts only once the sidecar accepts there (a
    /// startup probe), so the first cell does not race the sidecar's start.
    #[arg(long, value_name = "PORT")]
    pub sidecar_port: Option<u16>,
    /// Where both containers mount the shared emptyDir that holds the sidecar's socket.
    #[arg(long, value_name = "DIR", default_value = "/cloudsql")]
    pub socket_dir: String,
    /// A target name the suite uses, as the pod reaches it: NAME=CONNINFO (repeat), or a
    /// bare CONNINFO for every target; without its password.
    #[arg(long = "target", value_name = "NAME=CONNINFO", required = true)]
    pub targets: Vec<String>,
    #[command(flatten)]
    pub common: KubernetesCommon,
    /// More `connbench run` flags, after `--` (e.g. -- --quick, -- --budget 20m).
    #[arg(last = true, value_name = "RUN FLAGS")]
    pub run_flags: Vec<String>,
}

const KUBERNETES_EXAMPLES: &str = "\
The whole flow:
  kubectl create secret generic cb-store --from-literal=password=...
  kubectl create secret generic cb-db --from-literal=password=...
  connbench kubernetes job --workers 4 --image registry.example/connbench:0.1 \\
      --target 'host=db.prod port=5432 dbname=app user=bench' --target-secret cb-db \\
      --store postgres://cb@results.prod/connbench --store-secret cb-store \\
      --run exp2 -- -S -M prepared -c 256 -j 4 -T 300 --warmup 30s > job.yaml
  kubectl apply -f job.yaml
  kubectl wait --for=condition=complete --timeout=1h job/connbench-exp2
  connbench report exp2 --store postgres://cb@results.prod/connbench --json exp2.json";

/// What both Jobs take: where the pods save, under which name, the Secrets, the CPU.
#[derive(Debug, Args)]
pub struct KubernetesCommon {
    /// The PostgreSQL results store the pods save to, without its password.
    #[arg(long, value_name = "URL")]
    pub store: String,
    /// The run's name [default: load-DATE-TIME for a job, SUITE-DATE-TIME for a suite].
    #[arg(long, value_parser = parse_run_name)]
    pub run: Option<String>,
    /// The Secret holding the store's password (key `password`).
    #[arg(long, value_name = "NAME")]
    pub store_secret: Option<String>,
    /// The Secret holding the target's password (key `password`).
    #[arg(long, value_name = "NAME")]
    pub target_secret: Option<String>,
    /// CPU for connbench's container (request and limit, e.g. 2 or 1500m).
    #[arg(long)]
    pub cpu: Option<String>,
    /// yaml or json (a suite's Job: its ConfigMap and the Job as two YAML documents, or a
    /// List).
    #[arg(long, default_value = "yaml", value_parser = ["yaml", "json"])]
    pub output: String,
}

#[derive(Debug, Args)]
pub struct KubernetesJobArgs {
    /// The number of workers (pods): completions and parallelism of the Job.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=10000))]
    pub workers: u32,
    /// The container image with connbench as its entrypoint.
    #[arg(long)]
    pub image: String,
    /// What the workers load: a conninfo string or URI, without its password.
    #[arg(long)]
    pub target: String,
    #[command(flatten)]
    pub common: KubernetesCommon,
    /// Serve each worker's live metrics on this port (`--metrics-listen :PORT`, kept a
    /// minute after the run for a last scrape), with the pods annotated for Prometheus'
    /// annotation-based discovery (prometheus.io/scrape, port, path).
    #[arg(long, value_name = "PORT")]
    pub metrics_port: Option<u16>,
    /// The load flags, after `--` (e.g. -- -S -c 64 -T 300).
    #[arg(last = true, value_name = "LOAD FLAGS")]
    pub load: Vec<String>,
}
