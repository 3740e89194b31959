"""Settings from environment variables (GOVINDEX_*) or from a running stack's stack.json."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from govindex.core import tokens
from govindex.core.errors import StackNotRunning
from govindex.core.graph_templates import (
    DEFAULT_STATEMENT_TIMEOUT_MS,
    MAX_DECLARED,
    MAX_STEPS,
    GraphStep,
    GraphTemplates,
)
from govindex_client._types import GRAPH_TEMPLATE, quote

DEFAULT_STATE_DIR = Path(".govindex")
STACK_FILE = "stack.json"


class Consumers:
    """Every consumer's name, once: the outbox's `awaits` keys (an event stays pending until
    that consumer settles it, so a misspelt name would leave it pending forever), the
    processed-events ledger's consumer, and the suffix of its group (`NAMESPACE.NAME`)."""

    INDEXER: Final = "indexer"  # the documents topic (both lanes claim under this name)
    DELETIONS: Final = "indexer-deletions"  # the deletion lane's group
    PURGER: Final = "purger"  # the tombstones topic
    CDC: Final = "cdc"  # prefix of a CDC feed's consumer, `cdc:<source>`

    KINDS: Final = (INDEXER, PURGER, CDC)  # the worker kinds a process may run


class Topics(BaseModel):
    """Kafka topic names, all derived from one namespace so deployments never collide."""

    model_config = ConfigDict(frozen=True)

    documents: str
    deletions: str  # the deletion lane: never queued behind updates
    tombstones: str
    receipts: str
    dead_letters: str
    quarantine: str  # dead letters that failed every redrive: kept, never consumed

    @classmethod
    def for_namespace(cls, namespace: str) -> Topics:
        return cls(
            documents=f"{namespace}.documents",
            deletions=f"{namespace}.deletions",
            tombstones=f"{namespace}.tombstones",
            receipts=f"{namespace}.receipts",
            dead_letters=f"{namespace}.dead-letters",
            quarantine=f"{namespace}.quarantine",
        )

    def all(self) -> list[str]:
        return [
            self.documents,
            self.deletions,
            self.tombstones,
            self.receipts,
            self.dead_letters,
            self.quarantine,
        ]


class Servers(BaseModel):
    """The addresses a running pipeline needs; none of them optional (Redis aside)."""

    model_config = ConfigDict(frozen=True)

    pg_dsn: str
    kafka_bootstrap: str
    opensearch_url: str
    redis_url: str | None = None


class Settings(BaseSettings):
    """Where the servers are and how the pipeline names things in them.

    Production sets the four server addresses; a laptop gets them from `govindex up`'s
    stack.json. `namespace` prefixes topics, consumer groups and the index alias.
    """

    model_config = SettingsConfigDict(env_prefix="GOVINDEX_", frozen=True)

    pg_dsn: str | None = None
    kafka_bootstrap: str | None = None
    opensearch_url: str | None = None
    redis_url: str | None = None
    http_url: str | None = None
    namespace: str = "govindex"
    state_dir: Path = DEFAULT_STATE_DIR
    partitions: int = Field(
        default=4,
        ge=1,
        description="Partitions of the documents topic: the most indexer processes that can "
        "share it. Raise it before production data exists (keys move between partitions "
        "otherwise).",
    )
    republish_after_s: float = Field(
        default=60.0,
        gt=0,
        description="An emitted event no consumer applied is published again after this long "
        "(doubling).",
    )
    republish_on_start: bool = Field(
        default=True,
        description="Publish every pending event again when a relay starts (the broker may "
        "have lost it).",
    )
    batch_max_events: int = Field(
        default=500,
        ge=1,
        description="Batched consumers (the indexer): a lane per partition cuts a batch at "
        "this many events. batch_max_events=1 is the event-at-a-time indexer.",
    )
    batch_max_bytes: int = Field(
        default=16 * 1024 * 1024,
        ge=1024,
        description="Batched consumers (the indexer): a lane cuts a batch at this many bytes.",
    )
    batch_linger_ms: int = Field(
        default=20,
        ge=0,
        description="Batched consumers (the indexer): a lane cuts a batch after this linger.",
    )
    lane_queue_events: int = Field(
        default=2000,
        ge=1,
        description="Batched consumers (the indexer): a lane pauses its partition while this "
        "many records wait.",
    )
    bulk_max_chunks: int = Field(
        default=1000, ge=1, description="OpenSearch bulk requests: at most this many chunks each."
    )
    bulk_max_bytes: int = Field(
        default=8 * 1024 * 1024,
        ge=1024,
        description="OpenSearch bulk requests: at most this many bytes each.",
    )
    bulk_concurrency: int = Field(
        default=2,
        ge=1,
        description="OpenSearch bulk requests: at most this many in flight per process (all "
        "lanes share them).",
    )
    bulk_timeout_s: float = Field(
        default=120.0,
        gt=0,
        description="OpenSearch bulk requests: this long to answer.",
    )
    heal_every_s: float = Field(
        default=2.0,
        gt=0,
        description="Worker processes check this often that topics, the index alias and its "
        "generation survived a server's restart, and put back what is missing (see "
        "control/healing.py).",
    )
    cdc_rescan_s: float = Field(
        default=10.0,
        gt=0,
        description="The CDC worker looks for CDC sources registered since it started this often.",
    )
    control_poll_s: float = Field(
        default=2.0,
        gt=0,
        description="Workers read `govindex worker pause|resume` flags and write a heartbeat "
        "this often.",
    )
    metrics_host: str = Field(
        default="0.0.0.0",  # noqa: S104 - scraped from other hosts
        description="Address of the Prometheus `/metrics` of `govindex worker` (`govindex up` "
        "picks a free loopback port and writes it to stack.json).",
    )
    metrics_port: int = Field(
        default=9464,
        ge=0,
        le=65535,
        description="Port of the Prometheus `/metrics` of `govindex worker` (`govindex up` "
        "picks a free loopback port and writes it to stack.json).",
    )
    metrics_sample_s: float = Field(
        default=10.0, gt=0, description="Gauges of `/metrics` are sampled this often."
    )
    read_tokens: dict[str, list[str] | dict[str, Any]] = Field(
        default_factory=dict,
        description="The read API (internal listener): service token -> what it may assert. "
        'Bound: `{"<token>": {"name": "rag-app", "tenants": ["acme"], "principals": '
        '["user:*", "group:eng-*"], "purposes": ["support"]}}` (principals are globs every '
        "asserted principal must match; purposes omitted: any). A list of tenants "
        '(`{"<token>": ["acme"]}`, `"*"`: every tenant) binds tenants only: any principal and '
        "purpose. Tokens are random, at least 16 characters; the read API refuses to start "
        "with an entry it cannot use.",
    )
    read_jwks: str | None = Field(
        default=None,
        description="The read API accepts JWTs (access tokens of the tenants' identity "
        "provider) verified against this JWKS: a file path or an https URL, re-read for an "
        "unknown key id (rotation) and every 5 minutes. Needs GOVINDEX_READ_JWT_ISSUER and "
        "GOVINDEX_READ_JWT_AUDIENCE.",
    )
    read_jwt_issuer: str | None = Field(
        default=None, description="The `iss` every JWT must carry, exactly."
    )
    read_jwt_audience: str | None = Field(
        default=None, description="The `aud` every JWT must carry (this read API)."
    )
    read_jwt_tenant_claim: str = Field(
        default="tenant", description="The JWT claim holding the one tenant the token proves."
    )
    read_jwt_groups_claim: str = Field(
        default="groups",
        description="The JWT claim holding the caller's groups (a list), proven as "
        "`group:<g>` principals beside `user:<sub>`.",
    )
    read_jwt_leeway_s: float = Field(
        default=30.0,
        ge=0,
        le=600,
        description="Clock skew allowed on a JWT's `exp`, `nbf` and `iat`.",
    )
    read_host: str = Field(
        default="127.0.0.1", description="Address of the read API (internal listener)."
    )
    read_port: int = Field(
        default=8081, ge=0, le=65535, description="Port of the read API (internal listener)."
    )
    read_url: str | None = Field(
        default=None,
        description="Where clients find the read API (from stack.json under `govindex up`).",
    )
    read_token: str | None = Field(
        default=None,
        description="The token clients send to the read API (from stack.json under `govindex up`).",
    )
    admin_token: str | None = Field(
        default=None,
        description="The admin API (internal listener, `govindex worker admin`): operator jobs "
        "over HTTP, behind this bearer token (`govindex up` generates one and writes it to "
        "stack.json).",
    )
    admin_host: str = Field(
        default="127.0.0.1", description="Address of the admin API (internal listener)."
    )
    admin_port: int = Field(
        default=8082, ge=0, le=65535, description="Port of the admin API (internal listener)."
    )
    admin_url: str | None = Field(
        default=None,
        description="Where clients find the admin API (from stack.json under `govindex up`).",
    )
    embedder: str = Field(
        default="wordllama",
        min_length=1,
        max_length=4096,
        description="The dense channel's model: embeds chunks at ingest and queries at read "
        "time: `wordllama` (in its wheel), `none`, `model2vec:DIR` (`pip install "
        "'govindex[model2vec]'`), `sentence-transformers:DIR` (`pip install "
        "'govindex[sentence-transformers]'`) or `http:URL` (an OpenAI-compatible "
        "/v1/embeddings endpoint, with GOVINDEX_EMBEDDER_MODEL). Directories are local; "
        "nothing is downloaded (docs/operating/embedders.md).",
    )
    embedder_next: str | None = Field(
        default=None,
        min_length=1,
        max_length=4096,
        description="While changing models: the next model (same forms as GOVINDEX_EMBEDDER). "
        "Workers embed new chunks with both, `govindex reembed --execute` builds its vectors "
        "and makes it live; reads rank by whichever is live, never by both.",
    )
    embedder_model: str | None = Field(
        default=None,
        min_length=1,
        max_length=256,
        description="For `http:URL`: the model name sent with each request (required).",
    )
    embedder_api_key: SecretStr | None = Field(
        default=None, description="For `http:URL`: sent as a bearer token; never logged or shown."
    )
    embedder_dims: int | None = Field(
        default=None,
        ge=1,
        le=65536,
        description="For `http:URL`: the vectors' length; unset, learned from the first answer "
        "and then enforced.",
    )
    embedder_batch: int = Field(
        default=64, ge=1, le=2048, description="For `http:URL`: texts per request."
    )
    embedder_timeout_s: float = Field(
        default=30.0, gt=0, le=600, description="For `http:URL`: seconds one attempt may take."
    )
    embedder_retries: int = Field(
        default=3,
        ge=0,
        le=10,
        description="For `http:URL`: retries after connection errors, timeouts, 429 and 5xx "
        "(backoff with jitter; Retry-After honoured up to 30 s).",
    )
    embedder_max_response_bytes: int | None = Field(
        default=None,
        ge=1024,
        description="For `http:URL`: largest answer read; unset, 64 KiB + 32 bytes per number "
        "of the batch's vectors.",
    )
    embedder_version: str | None = Field(
        default=None,
        min_length=1,
        max_length=100,
        description="For `http:URL`: replaces the version stamped on vectors (default: "
        "model@digest of host and path).",
    )
    tokenizer: str = Field(
        default=tokens.DEFAULT_SPEC,
        description="How tokens are counted, the same way when the indexer stamps a chunk's "
        "`token_estimate` and when the read API packs chunks into `max_tokens`: `heuristic` "
        "(one token per CJK, kana or hangul character, characters / 4 for the rest), "
        "`hf:PATH` (a Hugging Face `tokenizer.json`) or `tiktoken:PATH` (a `.tiktoken` ranks "
        "file). Files are local, never downloaded, and need "
        "`pip install 'govindex[tokenizers]'`; a manifest records the tokenizer as "
        "`name/version` (the version of a file is its sha256).",
    )
    dense_min_similarity: float = Field(
        default=0.3,
        ge=-1,
        le=1,
        description="Cosine similarity under which the dense channel returns nothing for a chunk.",
    )
    embed_backlog_every_s: float = Field(
        default=5.0,
        gt=0,
        le=3600,
        description="How often an indexer embeds the chunks committed while a model was "
        "down or slow (doubling, up to 5 minutes, while it stays down).",
    )
    embed_deferred: bool = Field(
        default=False,
        description="Commit new chunks without their vectors and embed them from the backlog "
        "right after (each indexer drains it every GOVINDEX_EMBED_BACKLOG_EVERY_S, without a "
        "pause while more is queued): ingestion waits neither for the model nor for the HNSW "
        "index, and the dense channel finds a chunk once it is embedded, every other channel "
        "at once (docs/operating/vectors.md#embedding-after-the-commit).",
    )
    dense_ef_search: int = Field(
        default=100,
        ge=10,
        le=1000,
        description="Candidates pgvector's HNSW search keeps (hnsw.ef_search): higher finds "
        "more of the true nearest chunks, slower.",
    )
    vector_index_build_memory: str = Field(
        default="1GB",
        pattern=r"^[1-9][0-9]{0,5}(kB|MB|GB)$",
        description="PostgreSQL's maintenance_work_mem while a model generation's HNSW index "
        "is built (about 1.3 KB per 256-dimension vector keeps the graph in memory; past it "
        "the build goes to disk, about ten times slower).",
    )
    dense_max_scan_tuples: int = Field(
        default=20_000,
        ge=1_000,
        le=10_000_000,
        description="How many index entries an iterative HNSW scan reads at most to find "
        "enough chunks a selective filter admits (hnsw.max_scan_tuples).",
    )
    graph_templates: dict[str, list[GraphStep]] = Field(
        default_factory=dict,
        description=f"At most {MAX_DECLARED} path templates the graph channel may walk, "
        "added to the built-in ones (a built-in name is replaced), as JSON: "
        '`{"service_owner": [{"relation": "OWNED_BY", "to": "team"}], "team_runbooks": '
        '[{"relation": "OWNS", "to": "service"}, {"relation": "GOVERNED_BY", "to": '
        '"document"}]}`. A template has 1 or 2 steps; a step walks one relation of the '
        "vocabulary the way its name reads (OWNS: OWNED_BY backwards, from the team; "
        '`"direction": "in"` reads it the other way) and, with `to`, only to entities of '
        "that type (the prefix of the entity id). Names: lower-case letters, digits, `_` "
        "and `-`, at most 64. A request names templates in `graph.templates`.",
    )
    graph_default_templates: list[str] | None = Field(
        default=None,
        description="The templates a request that names none walks (built-in or declared in "
        "GOVINDEX_GRAPH_TEMPLATES); not set: every built-in one.",
    )
    graph_statement_timeout_ms: int = Field(
        default=DEFAULT_STATEMENT_TIMEOUT_MS,
        ge=1,
        le=600_000,
        description="Each statement of a graph walk runs under this PostgreSQL statement "
        "timeout; a walk that passes it is stopped and the read answers without the graph "
        "channel (named in `degraded`, with a trace line saying why).",
    )
    audit_retention_days: int = Field(
        default=90,
        ge=1,
        description="Audit records of answered reads are kept this many days; "
        "`govindex retention` deletes older ones.",
    )
    pack_retention_days: int = Field(
        default=30,
        ge=1,
        le=3650,
        description="Packs kept under an Idempotency-Key are served by GET /v1/packs/{id} "
        "and answer retries for this many days; `govindex retention` deletes them after.",
    )
    pg_pool_size: int = Field(
        default=8,
        ge=1,
        le=1000,
        description="Most PostgreSQL connections one process's pool holds (each worker "
        "process, each read API listener). Size it so that every process's pool fits the "
        "server's max_connections (docs/deploying/production.md).",
    )
    pg_pool_min: int = Field(
        default=1,
        ge=0,
        le=1000,
        description="PostgreSQL connections a pool keeps open while idle (at most "
        "GOVINDEX_PG_POOL_SIZE).",
    )
    kafka_security_protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = Field(
        default="PLAINTEXT",
        description="How every Kafka client (consumers, lanes, producers, admin, offsets) "
        "reaches the brokers: PLAINTEXT, SSL (TLS), SASL_PLAINTEXT or SASL_SSL (SASL over "
        "TLS: what managed Kafka services ask for).",
    )
    kafka_sasl_mechanism: (
        Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"] | None
    ) = Field(
        default=None,
        description="The SASL mechanism of SASL_PLAINTEXT and SASL_SSL (required there): "
        "PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (with GOVINDEX_KAFKA_SASL_USERNAME and "
        "GOVINDEX_KAFKA_SASL_PASSWORD), or OAUTHBEARER (with "
        "GOVINDEX_KAFKA_SASL_OAUTH_TOKEN_FILE).",
    )
    kafka_sasl_username: str | None = Field(
        default=None, description="The SASL user of PLAIN and SCRAM-SHA-256/512."
    )
    kafka_sasl_password: SecretStr | None = Field(
        default=None,
        description="The SASL password of PLAIN and SCRAM-SHA-256/512; never logged or shown.",
    )
    kafka_sasl_oauth_token_file: Path | None = Field(
        default=None,
        description="OAUTHBEARER: a file holding the bearer token, read again each time a "
        "client needs a token (a new connection, a re-authentication), so a token the "
        "platform rotates in place is picked up without a restart: how Kubernetes projects "
        "service-account tokens (a projected volume) and how workload identity hands them "
        "out. The file holds the token only.",
    )
    kafka_ssl_cafile: Path | None = Field(
        default=None,
        description="SSL and SASL_SSL: the CA certificates (PEM) that verify the brokers; "
        "not set, the system's CAs do (enough for a managed Kafka with a public CA).",
    )
    kafka_ssl_certfile: Path | None = Field(
        default=None,
        description="SSL and SASL_SSL: the client certificate (PEM) for brokers that ask "
        "for one (mutual TLS); needs GOVINDEX_KAFKA_SSL_KEYFILE.",
    )
    kafka_ssl_keyfile: Path | None = Field(
        default=None, description="The private key (PEM) of GOVINDEX_KAFKA_SSL_CERTFILE."
    )
    kafka_ssl_key_password: SecretStr | None = Field(
        default=None,
        description="The password of an encrypted GOVINDEX_KAFKA_SSL_KEYFILE; never logged.",
    )
    kafka_ssl_check_hostname: bool = Field(
        default=True,
        description="SSL and SASL_SSL: the broker's certificate must name the host "
        "connected to. Turning it off still verifies the certificate against the CAs.",
    )
    opensearch_username: str | None = Field(
        default=None,
        description="OpenSearch basic auth user; with GOVINDEX_OPENSEARCH_PASSWORD it "
        "replaces a user and password written in GOVINDEX_OPENSEARCH_URL.",
    )
    opensearch_password: SecretStr | None = Field(
        default=None, description="OpenSearch basic auth password; never logged or shown."
    )
    opensearch_ca_file: Path | None = Field(
        default=None,
        description="The CA certificates (PEM) that verify an https GOVINDEX_OPENSEARCH_URL; "
        "not set, the system's CAs (certifi's when installed) do.",
    )
    opensearch_client_cert: Path | None = Field(
        default=None,
        description="A client certificate (PEM) for an OpenSearch that asks for one "
        "(mutual TLS); needs GOVINDEX_OPENSEARCH_CLIENT_KEY.",
    )
    opensearch_client_key: Path | None = Field(
        default=None, description="The private key (PEM) of GOVINDEX_OPENSEARCH_CLIENT_CERT."
    )
    opensearch_verify_certs: bool = Field(
        default=True,
        description="Verify OpenSearch's certificate (and host name). Turn it off only to "
        "diagnose: the connection is then open to anyone in the middle.",
    )
    opensearch_aws_sigv4: bool = Field(
        default=False,
        description="Sign every OpenSearch request with AWS SigV4 (Amazon OpenSearch "
        "Service or Serverless) using botocore's credential chain (environment, profile, "
        "web identity (IRSA), instance role): `pip install 'govindex[aws]'`. Needs "
        "GOVINDEX_OPENSEARCH_AWS_REGION; excludes basic auth.",
    )
    opensearch_aws_region: str | None = Field(
        default=None, description="The AWS region SigV4 signs for, e.g. eu-west-1."
    )
    opensearch_aws_service: Literal["es", "aoss"] = Field(
        default="es",
        description="The service SigV4 signs for: `es` (OpenSearch Service domains) or "
        "`aoss` (OpenSearch Serverless collections).",
    )

    @field_validator("tokenizer")
    @classmethod
    def _usable_tokenizer(cls, spec: str) -> str:
        try:
            return tokens.check_spec(spec)
        except tokens.TokenizerError as exc:
            raise ValueError(f"{tokens.SETTING}={spec!r} is refused: {exc}") from None

    @field_validator("graph_templates")
    @classmethod
    def _template_names(cls, declared: dict[str, list[GraphStep]]) -> dict[str, list[GraphStep]]:
        if len(declared) > MAX_DECLARED:
            raise ValueError(
                f"GOVINDEX_GRAPH_TEMPLATES declares {len(declared)} templates; at most "
                f"{MAX_DECLARED}"
            )
        for name, steps in declared.items():
            if not re.fullmatch(GRAPH_TEMPLATE, name):
                raise ValueError(
                    f"GOVINDEX_GRAPH_TEMPLATES: the name {quote(name)} is refused: lower-case "
                    "letters, digits, '_' and '-', at most 64"
                )
            if not 1 <= len(steps) <= MAX_STEPS:
                raise ValueError(
                    f"GOVINDEX_GRAPH_TEMPLATES: the template {quote(name)} has {len(steps)} "
                    f"steps; a template has 1 to {MAX_STEPS}"
                )
        return declared

    @model_validator(mode="after")
    def _usable_graph_templates(self) -> Settings:
        # Refused when the process starts, not on the first read that walks the graph.
        try:
            GraphTemplates.of(self.graph_templates, self.graph_default_templates)
        except ValueError as exc:
            raise ValueError(f"GOVINDEX_GRAPH_DEFAULT_TEMPLATES is refused: {exc}") from None
        return self

    @model_validator(mode="after")
    def _pool_bounds(self) -> Settings:
        if self.pg_pool_min > self.pg_pool_size:
            raise ValueError(
                f"GOVINDEX_PG_POOL_MIN={self.pg_pool_min} is more than "
                f"GOVINDEX_PG_POOL_SIZE={self.pg_pool_size}"
            )
        return self

    @model_validator(mode="after")
    def _usable_security(self) -> Settings:
        # Refused when the process starts, naming the setting, not at the first connection.
        problems = [*_kafka_security_problems(self), *_opensearch_security_problems(self)]
        if problems:
            raise ValueError("; ".join(problems))
        return self

    @property
    def graph(self) -> GraphTemplates:
        """The graph channel's templates, default templates and statement timeout."""
        return GraphTemplates.of(
            self.graph_templates, self.graph_default_templates, self.graph_statement_timeout_ms
        )

    @property
    def topics(self) -> Topics:
        return Topics.for_namespace(self.namespace)

    @property
    def index_alias(self) -> str:
        return f"{self.namespace}-chunks"

    def group(self, worker: str) -> str:
        return f"{self.namespace}.{worker}"

    @property
    def servers_configured(self) -> bool:
        return all((self.pg_dsn, self.kafka_bootstrap, self.opensearch_url))

    def require_servers(self) -> Settings:
        """Fill missing addresses from `state_dir/stack.json`, or say how to get a stack."""
        if self.servers_configured:
            return self
        stack = read_stack_file(self.state_dir)
        if stack is None:
            raise StackNotRunning(
                f"no running stack found in {self.state_dir}/ and the server addresses are not "
                "set. Start one with `govindex up` (in another terminal, from this directory), "
                "pass --state-dir, or set GOVINDEX_PG_DSN, GOVINDEX_KAFKA_BOOTSTRAP and "
                "GOVINDEX_OPENSEARCH_URL."
            )
        merged: dict[str, Any] = {
            key: getattr(self, key) or stack.get(key)
            for key in (
                "pg_dsn",
                "kafka_bootstrap",
                "opensearch_url",
                "redis_url",
                "http_url",
                "read_url",
                "read_token",
                "admin_url",
                "admin_token",
            )
        }
        if "namespace" in stack and "namespace" not in self.model_fields_set:
            merged["namespace"] = stack["namespace"]
        return self.model_copy(update=merged)

    def servers(self) -> Servers:
        """Every address, from settings or the running stack's stack.json."""
        s = self.require_servers()
        assert s.pg_dsn and s.kafka_bootstrap and s.opensearch_url
        return Servers(
            pg_dsn=s.pg_dsn,
            kafka_bootstrap=s.kafka_bootstrap,
            opensearch_url=s.opensearch_url,
            redis_url=s.redis_url,
        )


def _missing_files(settings: Settings, names: tuple[str, ...]) -> list[str]:
    problems = []
    for name in names:
        path: Path | None = getattr(settings, name)
        if path is not None and not path.is_file():
            problems.append(f"GOVINDEX_{name.upper()}={str(path)!r} is not a readable file")
    return problems


def _kafka_security_problems(s: Settings) -> list[str]:
    problems = []
    sasl = s.kafka_security_protocol.startswith("SASL_")
    if sasl and s.kafka_sasl_mechanism is None:
        problems.append(
            f"GOVINDEX_KAFKA_SECURITY_PROTOCOL={s.kafka_security_protocol} needs "
            "GOVINDEX_KAFKA_SASL_MECHANISM (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER)"
        )
    if not sasl and s.kafka_sasl_mechanism is not None:
        problems.append(
            f"GOVINDEX_KAFKA_SASL_MECHANISM={s.kafka_sasl_mechanism} is set but "
            f"GOVINDEX_KAFKA_SECURITY_PROTOCOL={s.kafka_security_protocol} uses no SASL "
            "(SASL_SSL or SASL_PLAINTEXT)"
        )
    mechanism = s.kafka_sasl_mechanism if sasl else None
    if mechanism in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512") and not (
        s.kafka_sasl_username and s.kafka_sasl_password
    ):
        problems.append(
            f"GOVINDEX_KAFKA_SASL_MECHANISM={mechanism} needs GOVINDEX_KAFKA_SASL_USERNAME "
            "and GOVINDEX_KAFKA_SASL_PASSWORD"
        )
    if mechanism == "OAUTHBEARER" and s.kafka_sasl_oauth_token_file is None:
        problems.append(
            "GOVINDEX_KAFKA_SASL_MECHANISM=OAUTHBEARER needs GOVINDEX_KAFKA_SASL_OAUTH_TOKEN_FILE"
        )
    if (s.kafka_ssl_certfile is None) != (s.kafka_ssl_keyfile is None):
        problems.append(
            "GOVINDEX_KAFKA_SSL_CERTFILE and GOVINDEX_KAFKA_SSL_KEYFILE go together (a client "
            "certificate and its key)"
        )
    return problems + _missing_files(
        s,
        (
            "kafka_sasl_oauth_token_file",
            "kafka_ssl_cafile",
            "kafka_ssl_certfile",
            "kafka_ssl_keyfile",
        ),
    )


def _opensearch_security_problems(s: Settings) -> list[str]:
    problems = []
    if (s.opensearch_username is None) != (s.opensearch_password is None):
        problems.append("GOVINDEX_OPENSEARCH_USERNAME and GOVINDEX_OPENSEARCH_PASSWORD go together")
    if (s.opensearch_client_cert is None) != (s.opensearch_client_key is None):
        problems.append(
            "GOVINDEX_OPENSEARCH_CLIENT_CERT and GOVINDEX_OPENSEARCH_CLIENT_KEY go together "
            "(a client certificate and its key)"
        )
    if s.opensearch_aws_sigv4 and not s.opensearch_aws_region:
        problems.append("GOVINDEX_OPENSEARCH_AWS_SIGV4 needs GOVINDEX_OPENSEARCH_AWS_REGION")
    if s.opensearch_aws_sigv4 and s.opensearch_username is not None:
        problems.append(
            "GOVINDEX_OPENSEARCH_AWS_SIGV4 and GOVINDEX_OPENSEARCH_USERNAME exclude each other "
            "(a request is signed or carries basic auth, not both)"
        )
    return problems + _missing_files(
        s, ("opensearch_ca_file", "opensearch_client_cert", "opensearch_client_key")
    )


def read_stack_file(state_dir: Path) -> dict[str, Any] | None:
    path = state_dir / STACK_FILE
    if not path.exists():
        return None
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def redact(address: str) -> str:
    """An address with its password replaced by `***`, for what a person reads."""
    head, sep, rest = address.partition("://")
    if not sep or "@" not in rest:
        return address
    credentials, _, host = rest.rpartition("@")
    user = credentials.split(":", 1)[0]
    return f"{head}://{user}:***@{host}" if ":" in credentials else address
