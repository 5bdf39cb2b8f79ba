//! A subject's route: the one place a route is built (`route::build`) and its distance
//! verified (`route::verify`), for the handlers and the suite runner alike.

use std::time::Duration;

use anyhow::{Context, Result};

use crate::connect::Subject;
use crate::proto::Endpoint;
use crate::route::{Route, RouteSpec, Verified};
use crate::targets::Target;

/// The relays of `spec` in front of `target`; they run while the route lives.
pub fn build(target: &Target, spec: RouteSpec) -> Result<Route> {
    crate::route::build(target, spec)
}

/// The distance through `routed` measured against `direct`'s, requested against achieved.
pub async fn verify(direct: &Endpoint, routed: &Endpoint, distance: Duration) -> Result<Verified> {
    crate::route::verify(direct, routed, distance).await
}

/// Puts each subject behind the relays of `--path` and `--distance`; the routes returned
/// keep the relays running. A distance is measured first and printed, requested against
/// achieved.
pub async fn routed(
    subjects: Vec<Subject>,
    path: &str,
    distance: Option<Duration>,
) -> Result<(Vec<Subject>, Vec<Route>)> {
    let spec = RouteSpec {
        path: crate::route::PathKind::parse(path).context("--path")?,
        distance: distance.unwrap_or_default(),
    };
    if spec.is_direct() {
        return Ok((subjects, Vec::new()));
    }
    let mut out = Vec::new();
    let mut routes = Vec::new();
    for s in subjects {
        let r = build(&s.endpoint.target, spec)?;
        let mut ep = Endpoint::new(r.target.clone())?;
        ep.target.label = Some(format!("{}+{path}", s.endpoint.target.name()));
        if !spec.distance.is_zero() {
            let v = verify(&s.endpoint, &ep, spec.distance).await?;
            eprintln!(
                "route: {}: round trip requested +{:.2} ms, achieved +{:.3} ms{}",
                s.endpoint.target.name(),
                v.requested_ms,
                v.achieved_ms,
                if v.within_tolerance() {
                    ""
                } else {
                    " (outside max(0.2 ms, 3%): the machine may be overloaded)"
                }
            );
            ep.target.label = Some(format!(
                "{}+{}",
                s.endpoint.target.name(),
                crate::units::format_duration(spec.distance)
            ));
        }
        out.push(Subject {
            endpoint: ep,
            description: s.description,
        });
        routes.push(r);
    }
    Ok((out, routes))
}
