"""Generate ``kg_eval.json``: a knowledge graph of a fictional online marketplace's engineering
organisation, plus queries with the entities they should find.

Three kinds of queries:

- ``paraphrase``: the question shares (almost) no content word with its target, so keyword
  search alone tends to miss it;
- ``identifier``: an exact code (incident, flag, runbook, table, host), which a sentence
  embedding tends to blur;
- ``mixed``: natural questions sharing some words with the target.

Deterministic: ``python tests/memory/eval/make_kg_eval.py`` rewrites the same file.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

OUT = Path(__file__).with_name("kg_eval.json")

# (name, description, observations, paraphrased question)
SERVICES: list[tuple[str, str, list[str], str]] = [
    (
        "ledger-service",
        "Double-entry bookkeeping of every money movement between buyers, "
        "sellers and the platform.",
        ["Written in Kotlin", "Postgres 15 primary in eu-west"],
        "which system keeps the accounting records of funds flowing between parties",
    ),
    (
        "payout-scheduler",
        "Sends weekly transfers of earnings to merchants' bank accounts.",
        ["Runs every Monday 03:00 UTC"],
        "what pays vendors their revenue into their banks",
    ),
    (
        "fraud-screener",
        "Scores each order for stolen-card risk before capture.",
        ["Gradient-boosted model retrained nightly"],
        "how do we spot purchases made with pilfered credit cards",
    ),
    (
        "search-indexer",
        "Builds the product catalogue index consumed by storefront search.",
        ["Elasticsearch 8 cluster"],
        "component that prepares listings so shoppers can look them up",
    ),
    (
        "image-resizer",
        "Produces thumbnails and WebP variants of uploaded listing photos.",
        ["libvips based"],
        "what shrinks pictures sellers upload",
    ),
    (
        "notification-hub",
        "Delivers email, SMS and push messages to users.",
        ["Twilio and SES providers"],
        "who sends texts and mails to customers",
    ),
    (
        "tax-calculator",
        "Computes VAT and sales tax for each cart line by jurisdiction.",
        ["Rates refreshed from a vendor feed daily"],
        "how is the levy owed to governments worked out per purchase",
    ),
    (
        "shipping-quotes",
        "Returns carrier delivery prices and estimated arrival dates.",
        ["Integrates DHL, UPS and La Poste"],
        "where do parcel cost estimates come from",
    ),
    (
        "identity-gateway",
        "Handles login, OAuth tokens and session cookies.",
        ["Keycloak fork"],
        "what signs people in and issues access credentials",
    ),
    (
        "review-moderation",
        "Filters product reviews for spam, abuse and fake ratings.",
        ["Uses a toxicity classifier"],
        "system cleaning up insulting or bogus customer feedback",
    ),
    (
        "inventory-sync",
        "Reconciles stock counts from seller warehouses every five minutes.",
        ["Kafka consumer group inv-sync"],
        "keeps how many units are available up to date",
    ),
    (
        "currency-rates",
        "Caches foreign exchange rates for price display and settlement.",
        ["ECB feed with hourly refresh"],
        "where do we get conversion figures between euros and dollars",
    ),
    (
        "recommendation-engine",
        "Suggests related products on item pages and in emails.",
        ["Two-tower retrieval model"],
        "what proposes other things a shopper might like",
    ),
    (
        "dispute-desk",
        "Workflow for chargebacks and buyer-seller disagreements.",
        ["Zendesk integration"],
        "tool for handling customers contesting a card charge",
    ),
    (
        "seller-onboarding",
        "Collects business documents and verifies new merchants (KYC).",
        ["Onfido for ID checks"],
        "process for vetting shops that want to join",
    ),
    (
        "feature-flags",
        "Serves runtime toggles to every backend and mobile client.",
        ["Unleash server"],
        "how do we switch functionality on and off without deploying",
    ),
    (
        "audit-trail",
        "Append-only log of administrative actions for compliance.",
        ["Retained seven years"],
        "record of who changed what in the back office for regulators",
    ),
    (
        "cart-service",
        "Stores basket contents and applies promotions before checkout.",
        ["Redis backed"],
        "keeps the items a customer intends to buy",
    ),
    (
        "checkout-api",
        "Turns a basket into an order, authorises and captures payment.",
        ["p99 budget 800 ms"],
        "endpoint that finalises a purchase and takes the money",
    ),
    (
        "returns-portal",
        "Lets buyers request refunds and print prepaid return labels.",
        ["Refund decisions within 48 hours"],
        "where shoppers send products back",
    ),
    (
        "ad-auction",
        "Runs the sponsored-listing auction on search result pages.",
        ["Second-price auction"],
        "how are promoted placements sold to merchants",
    ),
    (
        "data-lake-ingest",
        "Lands change-data-capture streams into the object store.",
        ["Debezium connectors"],
        "pipeline copying database changes into bulk storage",
    ),
    (
        "pricing-advisor",
        "Suggests competitive prices to sellers from market data.",
        ["Weekly batch"],
        "helps merchants decide what to charge",
    ),
    (
        "translation-service",
        "Machine-translates listings into eleven languages.",
        ["DeepL API with glossary"],
        "converts product text so foreign visitors can read it",
    ),
]

PEOPLE: list[tuple[str, str, list[str], str]] = [
    (
        "Mara Quintero",
        "Staff engineer leading the payments platform.",
        ["Expert in PCI compliance"],
        "most senior technical lead on money handling",
    ),
    (
        "Jonas Feld",
        "Site reliability engineer, on call for storage.",
        ["Wrote the Postgres failover runbook"],
        "SRE responsible for databases during the night",
    ),
    (
        "Aiko Tanabe",
        "Data scientist who built the fraud model.",
        ["Prefers LightGBM"],
        "the statistician behind the stolen-card risk scoring",
    ),
    (
        "Priya Raman",
        "Engineering manager of the search and discovery team.",
        ["Hiring two engineers"],
        "who manages the people working on finding products",
    ),
    (
        "Tomás Ibarra",
        "Mobile lead for the iOS and Android apps.",
        ["Swift and Kotlin"],
        "who heads development of the phone applications",
    ),
    (
        "Lena Vogt",
        "Security engineer running the bug bounty programme.",
        ["Triage within one business day"],
        "contact for vulnerability reports from hackers",
    ),
    (
        "Samuel Osei",
        "Product manager for seller tools.",
        ["Owns the merchant dashboard roadmap"],
        "PM deciding what vendors get in their console",
    ),
    (
        "Nadia Petrova",
        "Principal architect for the event streaming platform.",
        ["Kafka committer"],
        "top designer of the message bus infrastructure",
    ),
    (
        "Karim Haddad",
        "Finance systems analyst, owns month-end close tooling.",
        ["Works with the ledger team"],
        "person handling accounting period closing software",
    ),
    (
        "Elif Demir",
        "Frontend engineer specialised in accessibility.",
        ["WCAG 2.2 auditor"],
        "web developer making pages usable for blind users",
    ),
]

RUNBOOKS: list[tuple[str, str, str]] = [
    (
        "RB-101",
        "Fail over the primary Postgres cluster to the standby region.",
        "steps to switch the main database to the backup site",
    ),
    (
        "RB-117",
        "Rotate TLS certificates on the edge load balancers.",
        "renew the HTTPS certs at the front proxies",
    ),
    (
        "RB-124",
        "Drain a Kubernetes node before kernel patching.",
        "safely empty a cluster machine before OS upgrades",
    ),
    (
        "RB-133",
        "Replay dead-lettered Kafka messages after a consumer bug.",
        "reprocess events that were parked because a reader crashed",
    ),
    (
        "RB-142",
        "Restore a single table from point-in-time backup.",
        "recover one dataset from an earlier snapshot",
    ),
    (
        "RB-150",
        "Throttle a misbehaving API client by key.",
        "rate limit one noisy integration partner",
    ),
    (
        "RB-158",
        "Purge the CDN cache for a product image path.",
        "clear edge caches so a new photo shows",
    ),
    (
        "RB-163",
        "Re-run a failed payout batch without double paying.",
        "retry vendor transfers safely after a crash",
    ),
    (
        "RB-171",
        "Freeze a seller account suspected of fraud.",
        "lock a merchant we think is scamming",
    ),
    (
        "RB-188",
        "Scale the search cluster ahead of a sales event.",
        "add capacity to product lookup before Black Friday",
    ),
]

SYMPTOMS = [
    "checkout latency above four seconds",
    "elevated 502 errors at the edge",
    "duplicate payout transfers",
    "search results missing new listings",
    "login loop on mobile apps",
    "thumbnails not generated",
    "tax totals off by one cent",
    "stale stock counts",
    "push notifications delayed by hours",
    "refunds stuck in pending",
]
CAUSES = [
    "an expired certificate",
    "a connection pool exhausted by a slow query",
    "a retry storm after a deploy",
    "clock skew between nodes",
    "a full disk on a broker",
    "a misconfigured feature flag",
    "a rounding change in a library upgrade",
    "a consumer lag spike",
    "a DNS resolver outage",
    "a schema migration lock",
]
TABLES = [
    ("orders_daily", "Orders, revenue and refunds aggregated per day and country."),
    ("seller_cohorts", "Merchant retention grouped by signup month."),
    ("search_clicks", "Query, result position and click for every search session."),
    ("payout_ledger", "One row per transfer to a seller bank account."),
    ("fraud_labels", "Confirmed chargebacks used to train the fraud model."),
    ("app_sessions", "Mobile session starts, duration and crash flags."),
    ("ad_impressions", "Sponsored listing impressions with bid and price paid."),
    ("inventory_snapshots", "Hourly stock level per SKU and warehouse."),
    ("support_tickets", "Customer contacts with category and resolution time."),
    ("price_changes", "Every listing price edit with old and new value."),
]
FLAGS = [
    ("ff_split_tender", "Allow paying one order with two cards."),
    ("ff_instant_payouts", "Let trusted sellers withdraw earnings immediately."),
    ("ff_new_search_ranker", "Route ten percent of queries to the learned ranker."),
    ("ff_webp_only", "Serve WebP images to every browser that accepts them."),
    ("ff_guest_checkout", "Buy without creating an account."),
    ("ff_review_photos", "Let buyers attach pictures to reviews."),
    ("ff_eu_vat_oss", "Use the EU one-stop-shop VAT scheme."),
    ("ff_carrier_fallback", "Quote a second carrier when the first times out."),
    ("ff_dark_mode_web", "Dark theme on the website."),
    ("ff_seller_chat", "Direct messages between buyers and sellers."),
]
TEAMS = [
    "Payments",
    "Search",
    "Growth",
    "Platform",
    "Trust & Safety",
    "Logistics",
    "Mobile",
    "Data",
]
ROLES = [
    "backend engineer",
    "data engineer",
    "QA engineer",
    "designer",
    "support specialist",
    "SRE",
    "analyst",
    "frontend engineer",
]
FIRST = [
    "Ana",
    "Ben",
    "Chloé",
    "Dev",
    "Eva",
    "Femi",
    "Gus",
    "Hana",
    "Ivo",
    "Jia",
    "Kofi",
    "Lia",
    "Max",
    "Noor",
    "Omar",
    "Pia",
    "Quinn",
    "Rui",
    "Sara",
    "Teo",
]
LAST = [
    "Abe",
    "Berg",
    "Costa",
    "Diaz",
    "Eze",
    "Fox",
    "Gill",
    "Holm",
    "Ito",
    "Jung",
    "Kaur",
    "Lund",
    "Mora",
    "Nagy",
    "Ortiz",
    "Park",
    "Rossi",
    "Sato",
    "Tran",
    "Vance",
]
HOST_ROLES = ["db", "kafka", "cache", "search", "worker"]
REGIONS = ["eu-west-1", "eu-central-1", "us-east-2", "ap-south-1"]


def build() -> dict[str, Any]:
    rng = random.Random(20261129)
    entities: list[dict[str, Any]] = []
    relations: list[dict[str, Any]] = []
    queries: list[dict[str, Any]] = []

    def entity(name: str, kind: str, desc: str, obs: list[str] | None = None) -> None:
        entities.append(
            {"name": name, "entity_type": kind, "description": desc, "observations": obs or []}
        )

    for name, desc, obs, question in SERVICES:
        entity(name, "Service", desc, obs)
        queries.append({"query": question, "expected": [name], "kind": "paraphrase"})
    for name, desc, obs, question in PEOPLE:
        entity(name, "Person", desc, obs)
        queries.append({"query": question, "expected": [name], "kind": "paraphrase"})
    for code, desc, question in RUNBOOKS:
        entity(code, "Runbook", desc)
        queries.append({"query": question, "expected": [code], "kind": "paraphrase"})
        queries.append({"query": code, "expected": [code], "kind": "identifier"})

    service_names = [s[0] for s in SERVICES]
    used: set[str] = set()
    for i in range(60):
        while True:
            code = f"INC-{rng.randint(1000, 9999)}"
            if code not in used:
                used.add(code)
                break
        service = rng.choice(service_names)
        symptom, cause = SYMPTOMS[i % 10], CAUSES[(i * 3 + i // 10) % 10]
        entity(
            code,
            "Incident",
            f"{symptom.capitalize()} in {service}, caused by {cause}.",
            [f"Severity {rng.randint(1, 3)}", f"Resolved in {rng.randint(12, 300)} minutes"],
        )
        relations.append({"from_entity": code, "to_entity": service, "relation_type": "affected"})
        if i < 15:
            queries.append(
                {"query": f"{code} postmortem", "expected": [code], "kind": "identifier"}
            )
        elif i < 25:
            queries.append(
                {
                    "query": f"{symptom} in {service} because of {cause}",
                    "expected": [code],
                    "kind": "mixed",
                }
            )

    for table, desc in TABLES:
        name = f"analytics.{table}"
        entity(name, "Table", desc, [f"Partitioned by {rng.choice(['day', 'month'])}"])
    for j, (flag, desc) in enumerate(FLAGS):
        entity(flag, "FeatureFlag", desc, [f"Rolled out to {rng.choice([5, 25, 50, 100])}%"])
        if j < 6:
            queries.append({"query": f"{flag} rollout", "expected": [flag], "kind": "identifier"})

    people = [(f, last) for f in FIRST for last in LAST]
    rng.shuffle(people)
    for first, last in people[:60]:
        team = rng.choice(TEAMS)
        role = rng.choice(ROLES)
        name = f"{first} {last}"
        entity(
            name,
            "Person",
            f"{role.capitalize()} in the {team} team.",
            [f"Joined in {rng.randint(2016, 2026)}"],
        )
        relations.append({"from_entity": name, "to_entity": team, "relation_type": "member_of"})
    for team in TEAMS:
        entity(team, "Team", f"The {team} engineering team.")

    hosts: list[str] = []
    while len(hosts) < 30:
        host = f"{rng.choice(HOST_ROLES)}-{rng.choice(REGIONS)}-{rng.randint(1, 40):02d}"
        if host not in hosts:
            hosts.append(host)
    for host in hosts:
        kind = host.split("-")[0]
        service = rng.choice(service_names)
        entity(host, "Host", f"{kind.capitalize()} node serving {service}.")
        relations.append({"from_entity": service, "to_entity": host, "relation_type": "runs_on"})
    for host in hosts[:6]:
        queries.append({"query": host, "expected": [host], "kind": "identifier"})
    for table, _ in TABLES[:5]:
        queries.append(
            {
                "query": f"analytics.{table} schema",
                "expected": [f"analytics.{table}"],
                "kind": "identifier",
            }
        )
    queries += [
        {
            "query": "tables about merchant retention",
            "expected": ["analytics.seller_cohorts"],
            "kind": "mixed",
        },
        {"query": "flag to pay with two cards", "expected": ["ff_split_tender"], "kind": "mixed"},
        {
            "query": "who wrote the Postgres failover runbook",
            "expected": ["Jonas Feld"],
            "kind": "mixed",
        },
        {
            "query": "hourly stock level per warehouse",
            "expected": ["analytics.inventory_snapshots"],
            "kind": "mixed",
        },
    ]
    names = [e["name"] for e in entities]
    assert len(names) == len(set(names)), "entity names must be unique"
    for q in queries:
        assert all(x in names for x in q["expected"]), q
    return {"entities": entities, "relations": relations, "queries": queries}


def main() -> None:
    data = build()
    OUT.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    kinds: dict[str, int] = {}
    for q in data["queries"]:
        kinds[q["kind"]] = kinds.get(q["kind"], 0) + 1
    print(
        f"{len(data['entities'])} entities, {len(data['relations'])} relations, "
        f"{len(data['queries'])} queries {kinds} -> {OUT}"
    )


if __name__ == "__main__":
    main()
