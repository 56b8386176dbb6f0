"""The demo organisation: people, flavors, pools, tiers, preemption classes, projects, quotas."""

from dataclasses import dataclass
from typing import Any

from django.utils.translation import gettext_noop

from governance.models import PreemptionKind, SiteRole

DEMO_PASSWORD = "arbiter-demo"
# Stored in English and shown in the reader's language (governance.models.texts).
DEMO_REASON = gettext_noop("Demo data")
DEMO_EMAIL_DOMAIN = "example.com"

# username, first name, last name, site role
PEOPLE = [
    ("ops", "Sam", "Okafor", SiteRole.OPS),
    # A second operator: approves and applies what ``ops`` proposes (never one's own).
    ("ops2", "Lena", "Fischer", SiteRole.OPS),
    ("approver", "Helen", "Chen", SiteRole.APPROVER),
    ("lead", "Lucas", "Martin", SiteRole.MEMBER),
    ("member", "Mei", "Lin", SiteRole.MEMBER),
    ("wei.zhang", "Wei", "Zhang", SiteRole.APPROVER),
    ("maria.garcia", "Maria", "Garcia", SiteRole.APPROVER),
    ("james.wilson", "James", "Wilson", SiteRole.OPS),
    ("anna.kowalski", "Anna", "Kowalski", SiteRole.APPROVER),
    ("raj.patel", "Raj", "Patel", SiteRole.MEMBER),
    ("sofia.rossi", "Sofia", "Rossi", SiteRole.MEMBER),
    ("kenji.tanaka", "Kenji", "Tanaka", SiteRole.MEMBER),
    ("fatima.khan", "Fatima", "Khan", SiteRole.MEMBER),
    ("david.cohen", "David", "Cohen", SiteRole.MEMBER),
    ("yuki.sato", "Yuki", "Sato", SiteRole.MEMBER),
    ("omar.haddad", "Omar", "Haddad", SiteRole.MEMBER),
    ("chen.jie", "Jie", "Chen", SiteRole.MEMBER),
    ("emma.brown", "Emma", "Brown", SiteRole.MEMBER),
    ("noah.schmidt", "Noah", "Schmidt", SiteRole.MEMBER),
    ("aisha.bello", "Aisha", "Bello", SiteRole.MEMBER),
    ("tom.nguyen", "Tom", "Nguyen", SiteRole.MEMBER),
    ("sara.lindqvist", "Sara", "Lindqvist", SiteRole.MEMBER),
    ("pedro.alves", "Pedro", "Alves", SiteRole.MEMBER),
]

FLAVORS: list[dict[str, Any]] = [
    {
        "slug": "a100-80g",
        "name": "A100 80G",
        "gpu_model": "NVIDIA A100-SXM4-80GB",
        "memory_gb": 80,
        "gres_type": "a100",
        "node_labels": {"gpu.example.com/model": "a100-80g"},
        "node_taints": [],
    },
    {
        "slug": "h100-80g",
        "name": "H100 80G",
        "gpu_model": "NVIDIA H100-SXM5-80GB",
        "memory_gb": 80,
        "gres_type": "h100",
        "node_labels": {"gpu.example.com/model": "h100-80g", "network.example.com/fabric": "ib"},
        "node_taints": [{"key": "gpu.example.com/h100", "value": "true", "effect": "NoSchedule"}],
    },
    {
        "slug": "l40s-48g",
        "name": "L40S 48G",
        "gpu_model": "NVIDIA L40S",
        "memory_gb": 48,
        "gres_type": "l40s",
        "node_labels": {"gpu.example.com/model": "l40s"},
        "node_taints": [
            {"key": "gpu.example.com/serving", "value": "true", "effect": "NoSchedule"}
        ],
    },
]

POOLS: list[dict[str, Any]] = [
    {
        "slug": "training",
        "name": "Training cluster",
        "description": "Batch training and fine-tuning: large jobs that checkpoint.",
        "capacity": {"a100-80g": 128, "h100-80g": 64},
    },
    {
        "slug": "inference",
        "name": "Inference cluster",
        "description": "Online serving and latency-sensitive batch scoring.",
        "capacity": {"l40s-48g": 48, "a100-80g": 16},
    },
]

# Created in this order: the default first, the tier aging reaches before the tier that ages,
# and the tier that preempts after the tiers it preempts.
TIERS: list[dict[str, Any]] = [
    {
        "slug": "regular",
        "name": "Regular",
        "score": 40,
        "scheduler_value": 400,
        "owner": "james.wilson",
        "description": "Everyday work of every project.",
        "eligibility": "Any project with a quota.",
        "confirmed_by": "No confirmation: the default tier.",
        "max_gpus_per_job": 32,
        # Every tier has a wait target (its wait alert): the review draws it.
        "wait_alert_minutes": 240,
        "review_cycle_days": 180,
        "reviewed_days_ago": 40,
        "is_default": True,
    },
    {
        "slug": "exploratory",
        "name": "Exploratory",
        "score": 10,
        "scheduler_value": 100,
        "owner": "anna.kowalski",
        "description": "Experiments, sweeps and notebooks that may wait and may be preempted.",
        "eligibility": "Any member, for work that can be stopped and resumed.",
        "confirmed_by": "No confirmation; the project lead answers for its use.",
        "max_gpus_per_job": 8,
        "max_gpus_total": 32,
        "aging_after_minutes": 240,
        "aging_step": 10,
        "aging_cap": "regular",
        "wait_alert_minutes": 720,
        "review_cycle_days": 90,
        "reviewed_days_ago": 30,
    },
    {
        "slug": "key-project",
        "name": "Key project",
        "score": 70,
        "scheduler_value": 700,
        "owner": "approver",
        "description": "Projects on this year's list of key projects.",
        "eligibility": "Projects named in the annual plan, for work on their milestones.",
        "confirmed_by": "The research director, at each quarterly planning.",
        "max_gpus_per_job": 64,
        "max_gpus_total": 128,
        "wait_alert_minutes": 60,
        "review_cycle_days": 90,
        # Due for review in 9 days: the demo shows a review that is coming up.
        "reviewed_days_ago": 81,
    },
    {
        "slug": "production",
        "name": "Production service",
        "score": 95,
        "scheduler_value": 950,
        "owner": "wei.zhang",
        "description": "Online services with a service-level objective.",
        "eligibility": "Services in the production service catalogue, with an on-call rota.",
        "confirmed_by": "The head of site reliability.",
        "max_gpus_per_job": 16,
        "max_gpus_total": 64,
        "may_preempt": True,
        "preemptible_tiers": ["regular", "exploratory"],
        "review_cycle_days": 90,
        "reviewed_days_ago": 20,
    },
]

PREEMPTION_CLASSES: list[dict[str, Any]] = [
    {
        "slug": "preemptible",
        "name": "Preemptible",
        "kind": PreemptionKind.ALLOWED,
        "business_impact": "Batch work that restarts from its last checkpoint; a preemption "
        "costs at most the work since that checkpoint.",
        "requires_verified_checkpoint": True,
        "max_checkpoint_interval_minutes": 30,
        "max_preemptions_per_day": 4,
        "recovery_owner": "james.wilson",
    },
    {
        "slug": "cautious",
        "name": "Cautious",
        "kind": PreemptionKind.CAUTIOUS,
        "business_impact": "Long training runs: a preemption loses hours of work and delays a "
        "milestone. Preempt only after two hours and once a day at most.",
        "requires_verified_checkpoint": True,
        "max_checkpoint_interval_minutes": 120,
        "min_runtime_minutes": 120,
        "max_preemptions_per_day": 1,
        "recovery_owner": "lead",
    },
    {
        "slug": "never-preempt",
        "name": "Never preempt",
        "kind": PreemptionKind.FORBIDDEN,
        "business_impact": "Online serving: a preemption is an outage for users.",
        "recovery_owner": "wei.zhang",
    },
]

# slug, name, tier (None: the default), lead, members, description
PROJECTS = [
    (
        "vision",
        "Vision",
        "key-project",
        "lead",
        ["member", "kenji.tanaka"],
        "Image and video foundation models.",
    ),
    (
        "llm-pretrain",
        "Language model pre-training",
        "key-project",
        "raj.patel",
        ["sofia.rossi", "chen.jie", "noah.schmidt"],
        "Pre-training of the in-house language models.",
    ),
    ("speech", "Speech", None, "fatima.khan", ["yuki.sato"], "Speech recognition and synthesis."),
    (
        "assistant",
        "Assistant serving",
        "production",
        "david.cohen",
        ["omar.haddad", "tom.nguyen"],
        "The customer assistant's online inference.",
    ),
    (
        "recsys",
        "Recommendations",
        "production",
        "emma.brown",
        ["aisha.bello"],
        "Ranking models and their online scoring.",
    ),
    (
        "fraud",
        "Fraud detection",
        "production",
        "omar.haddad",
        ["pedro.alves"],
        "Real-time fraud scoring of payments.",
    ),
    (
        "search",
        "Search relevance",
        None,
        "sara.lindqvist",
        ["tom.nguyen"],
        "Retrieval and ranking for site search.",
    ),
    (
        "ads",
        "Ads click-through",
        None,
        "pedro.alves",
        ["emma.brown"],
        "Click-through prediction for ads.",
    ),
    (
        "robotics",
        "Robotics simulation",
        None,
        "noah.schmidt",
        ["kenji.tanaka"],
        "Policy learning in simulation.",
    ),
    (
        "medical-imaging",
        "Medical imaging",
        None,
        "aisha.bello",
        ["sofia.rossi"],
        "Segmentation models for partner hospitals.",
    ),
    (
        "translation",
        "Machine translation",
        None,
        "yuki.sato",
        ["chen.jie"],
        "Translation models for product content.",
    ),
    (
        "sandbox",
        "Research sandbox",
        "exploratory",
        "anna.kowalski",
        ["member", "raj.patel"],
        "Short experiments by anyone; no guarantee beyond a small slice.",
    ),
]


@dataclass(frozen=True)
class DemoQuota:
    project: str
    pool: str
    flavor: str
    guarantee: int
    preemption_class: str
    borrow_limit: int | None = None
    lending_limit: int | None = None
    fair_share_weight: int = 1
    reclaim_grace_minutes: int = 15
    reviewed_days_ago: int = 60


# About 87 % of each pool's capacity is guaranteed; the rest is borrowed.
# project, pool, flavor, guarantee, preemption class, borrow limit, lending limit,
# fair-share weight, reclaim grace (minutes)
QUOTAS = [
    # training · A100 80G: 112 of 128
    DemoQuota("llm-pretrain", "training", "a100-80g", 32, "cautious", 32, 16, 4, 30),
    DemoQuota("vision", "training", "a100-80g", 24, "cautious", 16, 12, 3, 30),
    DemoQuota("speech", "training", "a100-80g", 12, "preemptible", 8, 12, 2),
    DemoQuota("search", "training", "a100-80g", 8, "preemptible", 8, 8),
    DemoQuota("ads", "training", "a100-80g", 8, "preemptible", 8, 8),
    DemoQuota("robotics", "training", "a100-80g", 8, "preemptible", None, 8),
    DemoQuota("medical-imaging", "training", "a100-80g", 8, "cautious", 4, 4),
    DemoQuota("translation", "training", "a100-80g", 8, "preemptible", 8, 8),
    # Reviewed 172 days ago on a 180-day cycle: the demo shows a quota review coming up.
    DemoQuota("sandbox", "training", "a100-80g", 4, "preemptible", 16, 4, reviewed_days_ago=172),
    # training · H100 80G: 56 of 64
    DemoQuota("llm-pretrain", "training", "h100-80g", 24, "cautious", 16, 8, 4, 30),
    DemoQuota("vision", "training", "h100-80g", 16, "cautious", 8, 8, 2, 30),
    DemoQuota("robotics", "training", "h100-80g", 8, "preemptible", 8, 8),
    DemoQuota("recsys", "training", "h100-80g", 8, "preemptible", 4, 8),
    # inference · L40S 48G: 42 of 48
    DemoQuota("assistant", "inference", "l40s-48g", 16, "never-preempt", 8, 0, 4, 0),
    DemoQuota("recsys", "inference", "l40s-48g", 12, "never-preempt", 4, 0, 3, 0),
    DemoQuota("fraud", "inference", "l40s-48g", 8, "never-preempt", 4, 0, 2, 0),
    DemoQuota("search", "inference", "l40s-48g", 4, "preemptible", 4, 4),
    DemoQuota("translation", "inference", "l40s-48g", 2, "preemptible", 2, 2),
    # inference · A100 80G: 14 of 16
    DemoQuota("assistant", "inference", "a100-80g", 8, "never-preempt", 2, 0, 2, 0),
    DemoQuota("fraud", "inference", "a100-80g", 4, "never-preempt", 2, 0),
    DemoQuota("recsys", "inference", "a100-80g", 2, "never-preempt", None, 0),
]
