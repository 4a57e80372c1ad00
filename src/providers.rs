//! The providers hookstamp knows by name, one row each: where a provider
//! puts its event id (its dedupe preset), how it signs (its scheme preset),
//! where it says what an event is (the event type a preset's source
//! inherits), the handshake its endpoint answers, and how it delivers and
//! retries ([docs/providers.md](../docs/providers.md)). Every per-provider
//! list derives from `PROVIDERS`: the dedupe presets (`dedupe`), the scheme
//! presets and their names (`verify::Scheme`), the inherited event types
//! (`config::events`), the handshakes' names (`config::handshake`), and
//! whether a source's provider redelivers by itself
//! (`config::Source::never_redelivered`). A new provider is a row here, and
//! its test cases.
//!
//! Facts only: this module uses no other of the crate.

/// A provider's row.
#[derive(Debug)]
pub struct Provider {
    /// Its name, as a `dedupe` preset, a `verify` scheme and the preset an
    /// event type is inherited from write it.
    pub name: &'static str,
    /// Where it puts its event id, which a retry repeats: its dedupe
    /// preset.
    pub dedupe: Option<EventId>,
    /// Its signature scheme, as `verify` checks it.
    pub scheme: Option<SchemePreset>,
    /// Where it says what an event is: inherited by a source whose dedupe
    /// preset or scheme is the provider's.
    pub event_type: Option<EventType>,
    /// The handshake its endpoint answers, by the name `handshake` takes.
    pub handshake: Option<&'static str>,
    /// How it delivers, as it documents it.
    pub delivery: Option<Delivery>,
}

/// Where a provider puts its event id.
#[derive(Debug)]
pub enum EventId {
    /// The first of these headers that is present.
    Headers(&'static [&'static str]),
    /// A JSON path, dotted.
    Json(&'static str),
}

/// Where a provider says what an event is.
#[derive(Debug)]
pub enum EventType {
    Header(&'static str),
    /// JSON paths, alternatives in order.
    Json(&'static [&'static [&'static str]]),
}

/// A provider's own signature scheme (`verify::Scheme::Preset`); its name
/// is its provider's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SchemePreset {
    Stripe,
    Github,
    Shopify,
    Slack,
    StandardWebhooks,
    Svix,
    Discord,
    Twilio,
}

/// How a provider delivers (docs/providers.md's table of them).
#[derive(Debug)]
pub struct Delivery {
    /// How long it waits for an answer.
    pub waits: &'static str,
    /// How it retries a failed delivery.
    pub retries: &'static str,
    pub redelivers: Redelivers,
}

/// Whether a provider redelivers a failed delivery by itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Redelivers {
    Yes,
    /// Never: every answer but a 2xx loses the event until someone
    /// redelivers it.
    No,
    /// The sender's own choice (a specification's senders).
    BySender,
}

/// Every provider, in the order the error messages list them.
pub const PROVIDERS: &[Provider] = &[
    Provider {
        name: "stripe",
        dedupe: Some(EventId::Json("id")),
        scheme: Some(SchemePreset::Stripe),
        event_type: Some(EventType::Json(&[&["type"]])),
        handshake: None,
        delivery: Some(Delivery {
            waits: "a short time (not published as a number)",
            retries: "with exponential backoff, for up to 3 days (live mode)",
            redelivers: Redelivers::Yes,
        }),
    },
    Provider {
        name: "github",
        dedupe: Some(EventId::Headers(&["x-github-delivery"])),
        scheme: Some(SchemePreset::Github),
        event_type: Some(EventType::Header("x-github-event")),
        handshake: None,
        delivery: Some(Delivery {
            waits: "10 s",
            retries: "never: redelivery is by hand (\"Recent Deliveries\") or through the REST API",
            redelivers: Redelivers::No,
        }),
    },
    // Shopify's webhook deliveries, and its newer event deliveries, which
    // drop the X- prefix. (Shopify suggests X-Shopify-Event-Id for
    // duplicates across topics; a delivery id is what a retry repeats.)
    Provider {
        name: "shopify",
        dedupe: Some(EventId::Headers(&[
            "x-shopify-webhook-id",
            "shopify-webhook-id",
        ])),
        scheme: Some(SchemePreset::Shopify),
        event_type: Some(EventType::Header("x-shopify-topic")),
        handshake: None,
        delivery: Some(Delivery {
            waits: "5 s",
            retries: "8 times over 4 hours; a subscription that keeps failing is removed",
            redelivers: Redelivers::Yes,
        }),
    },
    Provider {
        name: "slack",
        dedupe: None,
        scheme: Some(SchemePreset::Slack),
        event_type: Some(EventType::Json(&[&["event", "type"], &["type"]])),
        handshake: Some("slack"),
        delivery: Some(Delivery {
            waits: "3 s",
            retries: "3 times (at once, after 1 minute, after 5 minutes), with `X-Slack-Retry-Num`",
            redelivers: Redelivers::Yes,
        }),
    },
    Provider {
        name: "standard_webhooks",
        dedupe: Some(EventId::Headers(&["webhook-id"])),
        scheme: Some(SchemePreset::StandardWebhooks),
        event_type: Some(EventType::Json(&[&["type"]])),
        handshake: None,
        delivery: Some(Delivery {
            waits: "the sender's own",
            retries: "the sender's own (the specification asks senders to retry)",
            redelivers: Redelivers::BySender,
        }),
    },
    // Svix's own library takes the unbranded name too.
    Provider {
        name: "svix",
        dedupe: Some(EventId::Headers(&["svix-id", "webhook-id"])),
        scheme: Some(SchemePreset::Svix),
        event_type: Some(EventType::Json(&[&["type"]])),
        handshake: None,
        delivery: Some(Delivery {
            waits: "15 s",
            retries: "at once, then after 5 s, 5 min, 30 min, 2 h, 5 h, 10 h and 10 h",
            redelivers: Redelivers::Yes,
        }),
    },
    Provider {
        name: "discord",
        dedupe: None,
        scheme: Some(SchemePreset::Discord),
        event_type: None,
        handshake: Some("discord"),
        delivery: None,
    },
    Provider {
        name: "twilio",
        dedupe: None,
        scheme: Some(SchemePreset::Twilio),
        event_type: None,
        handshake: None,
        delivery: None,
    },
    // Zoom, Meta and X sign with a custom scheme (docs/providers.md).
    Provider {
        name: "zoom",
        dedupe: None,
        scheme: None,
        event_type: None,
        handshake: Some("zoom"),
        delivery: None,
    },
    Provider {
        name: "meta",
        dedupe: None,
        scheme: None,
        event_type: None,
        handshake: Some("meta"),
        delivery: None,
    },
    // X (Twitter): its CRC.
    Provider {
        name: "x",
        dedupe: None,
        scheme: None,
        event_type: None,
        handshake: Some("crc"),
        delivery: None,
    },
    // Salesforce's outbound messages: the id is a convention, the callout
    // must put a retry-stable id there.
    Provider {
        name: "salesforce",
        dedupe: Some(EventId::Json("id")),
        scheme: None,
        event_type: None,
        handshake: None,
        delivery: Some(Delivery {
            waits: "the org's own",
            retries: "with increasing intervals, for up to 24 hours",
            redelivers: Redelivers::Yes,
        }),
    },
];

/// A provider by name.
pub fn find(name: &str) -> Option<&'static Provider> {
    PROVIDERS.iter().find(|p| p.name == name)
}

/// What a column names, row by row, where the row has it: the lists the
/// error messages give.
pub fn listed(column: impl Fn(&'static Provider) -> Option<&'static str>) -> Vec<&'static str> {
    PROVIDERS.iter().filter_map(column).collect()
}

impl Provider {
    /// Whether a failed delivery of its is lost until someone redelivers
    /// it.
    pub fn never_redelivers(&self) -> bool {
        self.delivery
            .as_ref()
            .is_some_and(|d| d.redelivers == Redelivers::No)
    }

    /// The headers its event id is read from (none for one in the body).
    pub fn event_id_headers(&self) -> &'static [&'static str] {
        match self.dedupe {
            Some(EventId::Headers(hs)) => hs,
            _ => &[],
        }
    }
}

impl SchemePreset {
    /// Its name, its provider's.
    pub fn name(self) -> &'static str {
        PROVIDERS
            .iter()
            .find(|p| p.scheme == Some(self))
            .map_or("", |p| p.name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_a_scheme_is_one_providers() {
        for (i, p) in PROVIDERS.iter().enumerate() {
            assert!(
                PROVIDERS[..i].iter().all(|q| q.name != p.name),
                "{}",
                p.name
            );
        }
        let handshakes = listed(|p| p.handshake);
        for (i, h) in handshakes.iter().enumerate() {
            assert!(!handshakes[..i].contains(h), "{h}");
        }
        // A scheme names one row: the first with it is its name's.
        for p in PROVIDERS {
            if let Some(s) = p.scheme {
                assert_eq!(s.name(), p.name, "{s:?}");
            }
        }
    }

    /// docs/providers.md's table of deliveries says what each row does.
    #[test]
    fn the_docs_say_how_each_provider_delivers() {
        let docs = include_str!("../docs/providers.md");
        for p in PROVIDERS {
            let Some(d) = &p.delivery else { continue };
            let redelivers = match d.redelivers {
                Redelivers::Yes => "yes",
                Redelivers::No => "**no**",
                Redelivers::BySender => "depends on the sender",
            };
            let cells = format!("(`{}`", p.name);
            let row = format!("| {} | {} | {redelivers} |", d.waits, d.retries);
            assert!(
                docs.lines()
                    .any(|l| l.contains(&cells) && l.ends_with(&row)),
                "docs/providers.md has no row for {} ending {row}",
                p.name
            );
        }
    }
}
