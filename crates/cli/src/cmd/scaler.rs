//! `inferscale scaler`: KEDA's external scaler, served until Ctrl-C or SIGTERM.

use std::net::SocketAddr;
use std::process::ExitCode;

use anyhow::{Context, Result};
use inferscale_kube::Kube;
use inferscale_scaler::grpc::Tls;
use inferscale_scaler::{Options, Scaler};
use tokio::sync::watch;

use crate::cli::ScalerArgs;
use crate::output::emit;

fn address(flag: &str, v: &str, example: &str) -> Result<SocketAddr> {
    v.parse()
        .with_context(|| format!("{flag} {v:?} is not an address like {example}"))
}

pub(crate) fn run(args: &ScalerArgs) -> Result<ExitCode> {
    let grpc = address("--listen", &args.listen, "127.0.0.1:6000")?;
    let http = address("--http-listen", &args.http_listen, "127.0.0.1:6001")?;
    let tls = match (&args.tls_cert, &args.tls_key) {
        (Some(c), Some(k)) => Some(Tls::from_pem_files(c, k)?),
        _ => None,
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let kube = Kube::connect(&args.kube.access())
            .await
            .context("the Kubernetes API")?;
        let g = tokio::net::TcpListener::bind(grpc)
            .await
            .with_context(|| format!("cannot listen on {grpc}"))?;
        let h = tokio::net::TcpListener::bind(http)
            .await
            .with_context(|| format!("cannot listen on {http}"))?;
        let (ga, ha) = (g.local_addr()?, h.local_addr()?);
        let discovery = match &kube {
            Some(k) => format!(
                "service triggers find pods through EndpointSlices ({})",
                k.source()
            ),
            None => "no Kubernetes API: only targets triggers (give --kubeconfig or --context, or run in a pod)".to_owned(),
        };
        emit(&format!(
            "inferscale scaler: gRPC externalscaler.ExternalScaler on {ga}{}\n  HTTP on http://{ha}: /metrics, /healthz, /api/v1/value\n  {discovery}\n  stop with Ctrl-C\n",
            if tls.is_some() { " (TLS)" } else { "" }
        ))?;
        let scaler = Scaler::new(Options {
            scrape_timeout: args.scrape_timeout,
            cache_for: args.cache,
            push_every: args.push_every,
            kube,
        });
        let (tx, rx) = watch::channel(false);
        let mut serving = tokio::spawn(inferscale_scaler::run(scaler, g, tls, Some(h), rx));
        tokio::select! {
            _ = crate::shutdown::signal() => {}
            // The gRPC server ended by itself: nothing KEDA can reach is left.
            ended = &mut serving => {
                let _ = tx.send(true);
                return match ended {
                    Ok(Err(e)) => Err(anyhow::Error::new(e).context("the gRPC server failed")),
                    _ => Err(anyhow::anyhow!("the gRPC server stopped unasked")),
                };
            }
        }
        let _ = tx.send(true);
        let _ = tokio::time::timeout(std::time::Duration::from_secs(10), serving).await;
        eprintln!("inferscale scaler: stopped");
        Ok(ExitCode::SUCCESS)
    })
}
