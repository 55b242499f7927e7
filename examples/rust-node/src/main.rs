//! An a2a-bench executor node, written from docs/PROTOCOL.md alone (no line of the Python
//! reference is shared). It speaks the wire protocol on MQTT (Part 1) and the node-process
//! protocol on stdin/stdout (Part 2), with its agents played by the bench
//! (`"agents_by": "bench"`: it reports `agent_called` and waits for `task_finished`).
//!
//! What it implements: inbox, directory and roster (the default executor when empty),
//! signed envelopes v1 and v2 with strict/loose/audit admission, a durable ledger on
//! `type|messageId`, idempotent tasks (`taskId = requestId`) in a durable task table with a
//! watchdog, responses to `replyNodeId` only, streamed answers (FLOW_EVENT, thinking
//! coalesced), key rotation and clock skew, and a restart from its data dir.
//! Not implemented: process instances and gates, the requester side, browser tabs and the
//! client-side fault ops (each is refused as a `harness_error` line, the node going on).
//!
//! `--bug memory-dedup` switches on a realistic bug (seed 000 §3.2, A9): the ledger and
//! the task table live in memory only (the node says so: its ledger is not durable), so
//! after a restart a QoS1 redelivery of a request it already ran runs it again.

mod mqtt;
mod store;
mod wire;

use serde_json::{json, Map, Value};
use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::io::{self, BufRead, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use wire::{Envelope, Keys};

pub enum Msg {
    Line(String),
    Eof,
    Mqtt(mqtt::Incoming),
}

const KEEPALIVE_S: u16 = 5;
const LEDGER_FLUSH: Duration = Duration::from_millis(5_000);
const LEDGER_TTL_MS: i64 = 24 * 3600 * 1000;
const LEDGER_MAX: usize = 20_000;
const THINKING_WINDOW: Duration = Duration::from_millis(150);
const THINKING_MAX_BYTES: usize = 4096;
const DEFAULT_EXECUTOR: &str = "a2a-local-executor";
const TERMINAL: [&str; 4] = ["COMPLETED", "FAILED", "TIMEOUT", "CANCELLED"];

fn unix_ms() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs_f64() * 1000.0).unwrap_or(0.0)
}

fn namespace_of(agent: &str) -> Option<&str> {
    match agent.split_once('.') {
        Some((ns, rest)) if !ns.is_empty() && !rest.is_empty() => Some(ns),
        _ => None,
    }
}

fn str_list(v: &Value) -> Vec<String> {
    v.as_array().map(|a| a.iter().filter_map(|x| x.as_str().map(String::from)).collect()).unwrap_or_default()
}

fn opt_str(v: Option<&str>) -> Value {
    v.map(|s| Value::String(s.into())).unwrap_or(Value::Null)
}

#[derive(Clone)]
struct Task {
    agent_id: String,
    state: String,
    requester: String,
    reply_node: Option<String>,
    conversation: Option<String>,
    result: Value,
    error: Option<String>,
}

impl Task {
    fn to_json(&self) -> Value {
        json!({"agentId": self.agent_id, "state": self.state, "requester": self.requester,
               "replyNode": self.reply_node, "conversation": self.conversation,
               "result": self.result, "error": self.error})
    }

    fn from_json(v: &Value) -> Option<Task> {
        Some(Task {
            agent_id: v.get("agentId")?.as_str()?.into(),
            state: v.get("state")?.as_str()?.into(),
            requester: v.get("requester")?.as_str()?.into(),
            reply_node: v.get("replyNode").and_then(|x| x.as_str()).map(String::from),
            conversation: v.get("conversation").and_then(|x| x.as_str()).map(String::from),
            result: v.get("result").cloned().unwrap_or(Value::Null),
            error: v.get("error").and_then(|x| x.as_str()).map(String::from),
        })
    }
}

struct Flow {
    stream: String,
    conversation: String,
    agent_id: String,
    home: Option<String>,
    requester: String,
    task_id: String,
}

struct Thinking {
    due: Instant,
    text: String,
    task_id: String,
}

/// What a tracked publish reports when it settles (W-OUT-1).
struct Settle {
    message_id: String,
    message_type: String,
    reason: String,
    to_agent_id: Option<String>,
    target_node_id: Option<String>,
    request_id: Option<String>,
}

struct Out {
    topic: String,
    bytes: Vec<u8>,
    retain: bool,
    settle: Option<Settle>,
}

struct Node {
    // launch spec
    node_id: String,
    namespace: String,
    configured: Vec<String>,
    scene_groups: Vec<String>,
    client_id: String,
    prefix: String,
    task_timeout_ms: i64,
    auth_mode: String,
    sign_version: String,
    max_skew_ms: i64,
    keys: Keys,
    data_dir: PathBuf,
    broker: (String, u16),
    t0_ms: f64,
    username: String,
    password: Option<String>,
    bug_memory_dedup: bool,
    // state
    boot_id: String,
    sent: u64,
    skew_ms: f64,
    roster: Vec<String>,
    default_executor: bool,
    directory: BTreeMap<String, (bool, Vec<String>)>,
    ledger: HashMap<String, i64>,
    ledger_dirty: bool,
    evicted_total: u64,
    expired_total: u64,
    next_flush: Instant,
    tasks: BTreeMap<String, Task>,
    watchdogs: HashMap<String, Instant>,
    flows: HashMap<String, Flow>,
    streaming: HashSet<String>,
    out_seq: BTreeMap<String, i64>,
    thinking: HashMap<String, Thinking>,
    // the connection
    tx: mpsc::Sender<Msg>,
    conn: Option<TcpStream>,
    gen: u64,
    connected: bool,
    reconnect_at: Option<Instant>,
    last_sent: Instant,
    last_recv: Instant,
    next_pkid: u16,
    sub_pkid: u16,
    inflight: BTreeMap<u16, Out>,
    queue: VecDeque<Out>,
    out: io::Stdout,
}

impl Node {
    // -- the node-process protocol: events on stdout (P-OUT-1, P-OUT-2) ----------------------
    fn emit(&mut self, kind: &str, fields: Value) {
        let t_ms = (unix_ms() - self.t0_ms).round();
        let line = json!({"node": self.node_id, "kind": kind, "tMs": t_ms, "fields": fields});
        let mut out = self.out.lock();
        let _ = writeln!(out, "{line}");
        let _ = out.flush();
    }

    fn harness_error(&mut self, error: &str, op: &str) {
        self.emit("harness_error", json!({"error": error, "op": op}));
    }

    /// The node clock: Unix ms plus the clock_skew fault's offset (P-OP-6).
    fn now_ms(&self) -> i64 {
        (unix_ms() + self.skew_ms) as i64
    }

    fn new_message_id(&mut self) -> String {
        self.sent += 1;
        format!("{}.{}.{}", self.node_id, self.boot_id, self.sent)
    }

    fn topic_inbox(&self, node: &str) -> String {
        format!("{}/node/{}/inbox", self.prefix, node)
    }

    fn filters(&self) -> Vec<String> {
        let mut f = vec![self.topic_inbox(&self.node_id), format!("{}/directory/+", self.prefix)];
        f.extend(self.scene_groups.iter().map(|g| format!("{}/event/A2A/{}", self.prefix, g)));
        f
    }

    fn executors(&self) -> Vec<String> {
        if self.default_executor {
            vec![DEFAULT_EXECUTOR.to_string()]
        } else {
            self.roster.clone()
        }
    }

    fn announcement(&self, online: bool) -> Vec<u8> {
        let agents: Vec<Value> = if online {
            self.executors().iter().map(|a| json!({"agentId": a, "role": "executor"})).collect()
        } else {
            vec![]
        };
        wire::canonical(&json!({"agents": agents, "namespace": self.namespace,
                                "nodeId": self.node_id, "online": online}))
        .into_bytes()
    }

    // -- start (P-LIFE-3) ----------------------------------------------------------------------
    fn boot(&mut self) {
        if let Err(e) = std::fs::create_dir_all(&self.data_dir) {
            self.harness_error(&format!("cannot create the data dir: {e}"), "boot");
        }
        let store = self.data_dir.display().to_string();
        self.emit("self_check", json!({"line": "message store ready", "store": store}));
        self.emit("node_started", json!({"bootId": self.boot_id, "namespace": self.namespace,
            "clientId": self.client_id, "authMode": self.auth_mode,
            "signatureVersion": self.sign_version,
            // what of PROTOCOL.md §2.8 this node implements: no processes, gates or requests
            "features": ["tasks", "relay"]}));
        self.load_roster();
        self.load_ledger();
        self.load_tasks();
        if let Some(v) = store::read(&self.data_dir, store::RELAY) {
            if let Some(m) = v.get("out").and_then(|o| o.as_object()) {
                for (k, s) in m {
                    self.out_seq.insert(k.clone(), s.as_i64().unwrap_or(0));
                }
            }
        }
        let own = self.executors();
        self.directory.insert(self.node_id.clone(), (true, own));
        self.connect();
    }

    /// W-ROS-1..3 and W-ROS-5.
    fn load_roster(&mut self) {
        let mut agents = self.configured.clone();
        let mut restored = vec![];
        match store::read_result(&self.data_dir, store::ROSTER) {
            Ok(None) => {}
            Ok(Some(v)) => {
                let ns = v.get("namespace").and_then(|x| x.as_str()).unwrap_or("").to_string();
                let persisted = str_list(v.get("agents").unwrap_or(&Value::Null));
                if ns == self.namespace {
                    for a in persisted {
                        if !agents.contains(&a) {
                            restored.push(a.clone());
                            agents.push(a);
                        }
                    }
                } else {
                    let backup = self.data_dir.join(format!("{}.bak-{}", store::ROSTER, ns));
                    let _ = std::fs::rename(self.data_dir.join(store::ROSTER), backup);
                    self.emit("roster_rotated", json!({"fromNamespace": ns,
                        "toNamespace": self.namespace, "droppedAgents": persisted}));
                }
            }
            Err(problem) => {
                self.emit("warning", json!({"what": "roster unreadable; starting from configuration",
                                            "reason": problem}));
            }
        }
        self.roster = agents;
        let doc = json!({"version": 1, "namespace": self.namespace, "nodeId": self.node_id,
                         "agents": self.roster});
        store::write(&self.data_dir, store::ROSTER, &doc);
        self.emit("roster_loaded", json!({"agents": self.roster, "restored": restored,
                                          "namespace": self.namespace}));
        if self.roster.is_empty() {
            self.default_executor = true;
            self.emit("default_executor_registered", json!({"agentId": DEFAULT_EXECUTOR,
                "reason": "the roster is empty: never a mute receiver"}));
        }
    }

    fn load_ledger(&mut self) {
        if self.bug_memory_dedup {
            self.emit("ledger_restored", json!({"entries": 0, "problem": null, "durable": false,
                                                "ttlMs": LEDGER_TTL_MS}));
            return;
        }
        let (entries, problem) = match store::read_result(&self.data_dir, store::LEDGER) {
            Ok(None) => (0, None),
            Ok(Some(v)) => {
                if let Some(m) = v.get("entries").and_then(|e| e.as_object()) {
                    for (k, t) in m {
                        self.ledger.insert(k.clone(), t.as_i64().unwrap_or(0));
                    }
                }
                (self.ledger.len(), None)
            }
            Err(problem) => (0, Some(problem)),
        };
        self.emit("ledger_restored", json!({"entries": entries, "problem": problem,
                                            "durable": true, "ttlMs": LEDGER_TTL_MS}));
    }

    /// W-TASK-6: what was running when the node died ends FAILED "interrupted", and its
    /// requester is told.
    fn load_tasks(&mut self) {
        if self.bug_memory_dedup {
            return;
        }
        let Some(v) = store::read(&self.data_dir, store::TASKS) else { return };
        if let Some(m) = v.get("tasks").and_then(|t| t.as_object()) {
            for (id, t) in m {
                if let Some(task) = Task::from_json(t) {
                    self.tasks.insert(id.clone(), task);
                }
            }
        }
        if self.tasks.is_empty() {
            return;
        }
        let ended: Vec<String> = self
            .tasks
            .iter()
            .filter(|(_, t)| !TERMINAL.contains(&t.state.as_str()))
            .map(|(id, _)| id.clone())
            .collect();
        for id in &ended {
            let t = self.tasks.get_mut(id).unwrap();
            t.state = "FAILED".into();
            t.error = Some("interrupted".into());
        }
        self.save_tasks();
        let count = self.tasks.len();
        for id in &ended {
            let agent = self.tasks[id].agent_id.clone();
            self.emit("task_state", json!({"taskId": id, "agentId": agent, "state": "FAILED",
                                           "previous": "RUNNING", "error": "interrupted"}));
            self.respond(id);
        }
        self.emit("tasks_restored", json!({"tasks": count, "ended": ended}));
    }

    fn save_tasks(&mut self) {
        if self.bug_memory_dedup {
            return;   // the bug: idempotence that a crash forgets
        }
        let m: Map<String, Value> = self.tasks.iter().map(|(k, t)| (k.clone(), t.to_json())).collect();
        store::write(&self.data_dir, store::TASKS, &json!({"version": 1, "tasks": m}));
    }

    fn flush_ledger(&mut self) {
        self.next_flush = Instant::now() + LEDGER_FLUSH;
        if !self.ledger_dirty || self.bug_memory_dedup {
            return;
        }
        let now = self.now_ms();
        let before = self.ledger.len();
        self.ledger.retain(|_, seen| now - *seen <= LEDGER_TTL_MS);
        let expired = before - self.ledger.len();
        self.expired_total += expired as u64;
        if self.ledger.len() > LEDGER_MAX {
            let mut by_age: Vec<(i64, String)> = self.ledger.iter().map(|(k, t)| (*t, k.clone())).collect();
            by_age.sort();
            let evict = self.ledger.len() - LEDGER_MAX;
            for (_, k) in by_age.into_iter().take(evict) {
                self.ledger.remove(&k);
            }
            self.evicted_total += evict as u64;
        }
        let m: Map<String, Value> = self.ledger.iter().map(|(k, t)| (k.clone(), json!(t))).collect();
        store::write(&self.data_dir, store::LEDGER, &json!({"version": 1, "entries": m}));
        self.ledger_dirty = false;
        self.emit("ledger_flushed", json!({"entries": self.ledger.len(), "expired": expired,
            "evictedTotal": self.evicted_total, "expiredTotal": self.expired_total}));
    }

    // -- MQTT (W-MQTT-*) -----------------------------------------------------------------------
    fn connect(&mut self) {
        self.gen += 1;
        self.reconnect_at = None;
        match mqtt::open(&self.broker, self.gen, self.tx.clone()) {
            Ok(mut stream) => {
                let will = mqtt::Will {
                    topic: format!("{}/directory/{}", self.prefix, self.node_id),
                    payload: self.announcement(false),
                };
                let packet = mqtt::connect_packet(&mqtt::ConnectSpec {
                    client_id: &self.client_id,
                    username: &self.username,
                    password: self.password.as_deref(),
                    keepalive_s: KEEPALIVE_S,
                    will: &will,
                });
                if mqtt::write_all(&mut stream, &packet).is_err() {
                    mqtt::close(&stream);
                }
                self.last_sent = Instant::now();
                self.last_recv = Instant::now();
                self.conn = Some(stream);
            }
            Err(_) => self.retry_later(),
        }
    }

    fn retry_later(&mut self) {
        // a 1-2 s backoff, as the reference (W-MQTT-2)
        let jitter = (unix_ms() as u64 % 1000) as u64;
        self.reconnect_at = Some(Instant::now() + Duration::from_millis(1000 + jitter));
    }

    fn write(&mut self, bytes: &[u8]) -> bool {
        let Some(stream) = self.conn.as_mut() else { return false };
        if mqtt::write_all(stream, bytes).is_err() {
            mqtt::close(stream);   // the reader thread reports the close
            return false;
        }
        self.last_sent = Instant::now();
        true
    }

    fn pkid(&mut self) -> u16 {
        loop {
            self.next_pkid = if self.next_pkid == u16::MAX { 1 } else { self.next_pkid + 1 };
            if !self.inflight.contains_key(&self.next_pkid) && self.next_pkid != self.sub_pkid {
                return self.next_pkid;
            }
        }
    }

    /// QoS1; queued while disconnected and sent after the reconnect (W-MQTT-7).
    fn publish(&mut self, out: Out) {
        if !self.connected {
            self.queue.push_back(out);
            return;
        }
        let pkid = self.pkid();
        let packet = mqtt::publish_packet(&out.topic, &out.bytes, 1, out.retain, false, pkid);
        self.inflight.insert(pkid, out);
        self.write(&packet);
    }

    fn on_packet(&mut self, gen: u64, packet: mqtt::Packet) {
        if gen != self.gen {
            return;
        }
        self.last_recv = Instant::now();
        match packet {
            mqtt::Packet::ConnAck { session_present, code } => {
                if code != 0 {
                    let why = format!("CONNACK refused the connection (return code {code})");
                    self.emit("mqtt_disconnected", json!({"clientId": self.client_id, "reason": why}));
                    if let Some(s) = self.conn.take() {
                        mqtt::close(&s);
                    }
                    self.gen += 1;
                    self.retry_later();
                    return;
                }
                self.connected = true;
                let broker = format!("{}:{}", self.broker.0, self.broker.1);
                self.emit("mqtt_connected", json!({"clientId": self.client_id,
                    "sessionPresent": session_present, "broker": broker}));
                // W-TOP-4: one SUBSCRIBE at QoS1 on every CONNACK
                let filters = self.filters();
                self.sub_pkid = 0;
                self.sub_pkid = self.pkid();
                let sub = mqtt::subscribe_packet(self.sub_pkid, &filters, 1);
                self.write(&sub);
                self.emit("connected", json!({"clientId": self.client_id,
                    "sessionPresent": session_present, "subscriptions": filters}));
                // what was unacknowledged goes again, DUP set; then what waited
                let again: Vec<(u16, Vec<u8>)> = self
                    .inflight
                    .iter()
                    .map(|(p, o)| (*p, mqtt::publish_packet(&o.topic, &o.bytes, 1, o.retain, true, *p)))
                    .collect();
                for (_, packet) in again {
                    self.write(&packet);
                }
                while let Some(out) = self.queue.pop_front() {
                    self.publish(out);
                }
            }
            mqtt::Packet::SubAck { pkid, codes } => {
                if pkid != self.sub_pkid {
                    return;
                }
                let ok = codes.iter().all(|c| *c != 0x80);
                let agents = self.executors();
                let registered = if ok { agents.len() } else { 0 };
                self.emit("executors_registered", json!({"registered": registered,
                    "expected": agents.len(), "agents": agents, "subscribed": self.filters()}));
                self.announce();   // W-DIR-3: only after the SUBACK
            }
            mqtt::Packet::PubAck { pkid } => {
                if let Some(out) = self.inflight.remove(&pkid) {
                    if let Some(s) = out.settle {
                        self.settled(&s, "PUBLISHED", &s.reason.clone(), Some(&out.topic));
                    }
                }
            }
            mqtt::Packet::Publish { topic, payload, qos, dup, retain, pkid } => {
                self.on_message(&topic, &payload, qos, dup, retain, pkid);
                if qos == 1 {
                    // write-ahead (W-MQTT-5): everything the message wrote is on disk by now
                    self.write(&mqtt::puback_packet(pkid));
                }
            }
            mqtt::Packet::PingResp | mqtt::Packet::Other(_) => {}
        }
    }

    fn on_closed(&mut self, gen: u64, why: String) {
        if gen != self.gen {
            return;
        }
        if self.connected {
            self.emit("mqtt_disconnected", json!({"clientId": self.client_id, "reason": why}));
        }
        self.connected = false;
        self.conn = None;
        self.retry_later();
    }

    fn announce(&mut self) {
        let out = Out {
            topic: format!("{}/directory/{}", self.prefix, self.node_id),
            bytes: self.announcement(true),
            retain: true,
            settle: None,
        };
        self.publish(out);
    }

    // -- outbound (W-OUT-*) ------------------------------------------------------------------
    fn settled(&mut self, s: &Settle, state: &str, reason: &str, topic: Option<&str>) {
        self.emit("outbound_settled", json!({"messageId": s.message_id, "messageType": s.message_type,
            "state": state, "reason": reason, "toAgentId": s.to_agent_id,
            "targetNodeId": s.target_node_id, "requestId": s.request_id, "topic": topic}));
    }

    fn resolve(&self, agent: &str) -> Option<String> {
        self.directory
            .iter()
            .filter(|(_, (_, agents))| agents.iter().any(|a| a == agent))
            .map(|(node, (online, _))| (*online, node.clone()))
            .max()
            .map(|(_, node)| node)
    }

    /// Targeted send: explicit targetNodeId, else the directory; never a broadcast.
    fn send(&mut self, mut env: Envelope, explicit_only: bool) {
        env.headers.insert("originNodeId".into(), self.node_id.clone());
        let target: Result<(String, String), String> = if explicit_only && env.target_node_id.is_none() {
            Err("no targetNodeId (the request carried no headers.replyNodeId)".into())
        } else if let Some(t) = &env.target_node_id {
            Ok((t.clone(), "explicit targetNodeId".into()))
        } else if let Some(agent) = &env.to_agent_id {
            match self.resolve(agent) {
                Some(n) => Ok((n, format!("directory entry of '{agent}'"))),
                None => Err(format!("agent '{agent}' is in no directory entry ({} agents known)", self.known())),
            }
        } else {
            Err("no targetNodeId and no toAgentId".into())
        };
        let mut settle = Settle {
            message_id: env.message_id.clone(),
            message_type: env.message_type.clone(),
            reason: String::new(),
            to_agent_id: env.to_agent_id.clone(),
            target_node_id: env.target_node_id.clone(),
            request_id: env.header("requestId").map(String::from),
        };
        let (node, reason) = match target {
            Ok((node, _)) if !wire::segment_ok(&node) => {
                return self.undeliverable(&settle, &format!("targetNodeId {node:?} is not one topic segment"));
            }
            Ok(t) => t,
            Err(reason) => return self.undeliverable(&settle, &reason),
        };
        env.target_node_id = Some(node.clone());
        settle.target_node_id = Some(node.clone());
        settle.reason = reason;
        if node == self.node_id {
            let reason = format!("local ({})", settle.reason);
            self.settled(&settle, "LOCAL_CONSUMED", &reason, None);
            self.route_local(env);
            return;
        }
        wire::sign(&mut env, &self.keys, &self.node_id, &self.sign_version);
        let topic = self.topic_inbox(&node);
        self.publish(Out { topic, bytes: env.encode(), retain: false, settle: Some(settle) });
    }

    fn undeliverable(&mut self, s: &Settle, reason: &str) {
        self.emit("warning", json!({"what": "undeliverable", "messageId": s.message_id,
                                    "toAgentId": s.to_agent_id, "reason": reason}));
        self.settled(s, "UNDELIVERABLE", reason, None);
    }

    fn route_local(&mut self, env: Envelope) {
        // W-LED-4: no ledger, no signature check
        match env.message_type.as_str() {
            "TASK_REQUEST" => {
                if let Ok(handler) = self.can_handle(env.to_agent_id.as_deref()) {
                    self.admitted(&env, None, json!({}), "local", handler);
                    self.on_request(&env);
                }
            }
            other => self.harness_error(&format!("a {other} to itself has no handler here"), "send"),
        }
    }

    // -- inbound (§1.9) ----------------------------------------------------------------------
    fn known(&self) -> usize {
        self.directory.values().flat_map(|(_, a)| a.iter()).collect::<HashSet<_>>().len()
    }

    fn on_message(&mut self, topic: &str, payload: &[u8], qos: u8, dup: bool, retain: bool, pkid: u16) {
        let flags = json!({"qos": qos, "dup": dup, "retain": retain, "packetId": pkid});
        let dir_prefix = format!("{}/directory/", self.prefix);
        if let Some(nid) = topic.strip_prefix(&dir_prefix) {
            return self.on_announcement(topic, nid, payload, flags);
        }
        let group = topic
            .strip_prefix(&format!("{}/event/A2A/", self.prefix))
            .filter(|g| self.scene_groups.iter().any(|s| s == g))
            .map(String::from);
        let inbox = topic == self.topic_inbox(&self.node_id);
        if group.is_none() && !inbox {
            return self.dropped(&flags, "NOT_MINE", &format!("topic {topic} is not this node's"),
                                topic, None, None, payload.len());
        }
        let env = match wire::decode(payload).and_then(|env| wire::check_payload(&env).map(|_| env)) {
            Ok(env) => env,
            Err((code, detail)) => {
                return self.dropped(&flags, "MALFORMED", &format!("{code}: {detail}"), topic, None, None,
                                    payload.len());
            }
        };
        if env.header("originNodeId") == Some(self.node_id.as_str()) {
            return self.dropped(&flags, "SELF_LOOP", "originNodeId is this node", topic, Some(&env), None,
                                payload.len());
        }
        let verdict = wire::verify(&env, &self.keys, self.now_ms(), self.max_skew_ms);
        let admit = match self.auth_mode.as_str() {
            "strict" => verdict == "VERIFIED",
            "audit" => true,
            _ => verdict == "VERIFIED" || verdict == "UNSIGNED",
        };
        if self.auth_mode == "audit" {
            self.emit("auth_verdict", json!({"messageId": env.message_id, "verdict": verdict,
                "mode": self.auth_mode, "admitted": true, "fromAgentId": env.from_agent_id,
                "kid": env.header("x-a2a-kid"), "signerNode": env.header("x-a2a-node")}));
        }
        if !admit {
            let detail = format!("verdict {verdict} is not admitted in {} mode", self.auth_mode);
            return self.dropped(&flags, "AUTH_REJECTED", &detail, topic, Some(&env), Some(verdict),
                                payload.len());
        }
        let key = format!("{}|{}", env.message_type, env.message_id);
        let now = self.now_ms();
        if let Some(seen) = self.ledger.get(&key) {
            if now - *seen <= LEDGER_TTL_MS {
                let detail = format!("{key} is in the ledger");
                return self.dropped(&flags, "DUPLICATE", &detail, topic, Some(&env), Some(verdict),
                                    payload.len());
            }
        }
        self.ledger.insert(key, now);
        self.ledger_dirty = true;
        if let Some(g) = group {
            if env.message_type != "EVENT" {
                let detail = format!("only EVENT travels on a group topic, not {}", env.message_type);
                return self.dropped(&flags, "NOT_MINE", &detail, topic, Some(&env), Some(verdict), payload.len());
            }
            self.admitted(&env, Some(verdict), flags, "mqtt", "group");
            self.emit("group_event_received", json!({"messageId": env.message_id,
                "sceneGroupId": env.scene_group_id.clone().unwrap_or(g), "fromAgentId": env.from_agent_id}));
            return;
        }
        if let Some(t) = &env.target_node_id {
            if t != &self.node_id {
                let detail = format!("targetNodeId {t} is another node");
                return self.dropped(&flags, "NOT_MINE", &detail, topic, Some(&env), Some(verdict), payload.len());
            }
        }
        match env.message_type.as_str() {
            "TASK_REQUEST" => match self.can_handle(env.to_agent_id.as_deref()) {
                Ok(handler) => {
                    self.admitted(&env, Some(verdict), flags, "mqtt", handler);
                    self.on_request(&env);
                }
                Err(why) => self.dropped(&flags, "NOT_MINE", &why, topic, Some(&env), Some(verdict), payload.len()),
            },
            "TASK_RESPONSE" => {
                // this node requests nothing: every response is unmatched
                self.admitted(&env, Some(verdict), flags, "mqtt", "requests");
                let request_id = env.header("requestId").map(String::from);
                let reason = if request_id.is_some() { "unknown requestId" } else { "no requestId header" };
                self.emit("response_unmatched", json!({"requestId": request_id,
                    "messageId": env.message_id, "reason": reason}));
            }
            other => {
                let detail = format!("no handler for {other} on this node");
                self.dropped(&flags, "NOT_MINE", &detail, topic, Some(&env), Some(verdict), payload.len())
            }
        }
    }

    /// W-ROS-4: canHandle.
    fn can_handle(&self, to: Option<&str>) -> Result<&'static str, String> {
        let Some(agent) = to else { return Err("CROSS_NAMESPACE: no toAgentId".into()) };
        if self.roster.iter().any(|a| a == agent) {
            return Ok("EXACT");
        }
        let own = agent == DEFAULT_EXECUTOR || namespace_of(agent) == Some(self.namespace.as_str());
        match (own, self.default_executor) {
            (true, true) => Ok("DEFAULT_EXECUTOR"),
            (true, false) => Err(format!("UNKNOWN_AGENT: no executor for {agent} on this node")),
            (false, _) => Err(format!("CROSS_NAMESPACE: {agent} is not in namespace {}", self.namespace)),
        }
    }

    fn admitted(&mut self, env: &Envelope, verdict: Option<&str>, flags: Value, via: &str, handler: &str) {
        let mut f = flags.as_object().cloned().unwrap_or_default();
        let more = json!({"messageId": env.message_id, "messageType": env.message_type,
            "fromAgentId": env.from_agent_id, "toAgentId": env.to_agent_id,
            "targetNodeId": env.target_node_id, "requestId": env.header("requestId"),
            "originNodeId": env.header("originNodeId"), "replyNodeId": env.header("replyNodeId"),
            "verdict": verdict, "via": via, "handler": handler});
        f.extend(more.as_object().unwrap().clone());
        self.emit("inbound_admitted", Value::Object(f));
    }

    #[allow(clippy::too_many_arguments)]
    fn dropped(&mut self, flags: &Value, reason: &str, detail: &str, topic: &str, env: Option<&Envelope>,
               verdict: Option<&str>, size: usize) {
        let mut f = flags.as_object().cloned().unwrap_or_default();
        let more = json!({"reason": reason, "detail": detail, "topic": topic,
            "messageId": env.map(|e| e.message_id.clone()),
            "messageType": env.map(|e| e.message_type.clone()),
            "fromAgentId": env.map(|e| e.from_agent_id.clone()),
            "requestId": opt_str(env.and_then(|e| e.header("requestId"))),
            "verdict": verdict, "bytes": size});
        f.extend(more.as_object().unwrap().clone());
        self.emit("inbound_dropped", Value::Object(f));
    }

    /// W-DIR-4 and W-DIR-5.
    fn on_announcement(&mut self, topic: &str, nid: &str, payload: &[u8], flags: Value) {
        let mut f = flags.as_object().cloned().unwrap_or_default();
        if !wire::segment_ok(nid) {
            f.extend(json!({"topic": topic, "reason": "the nodeId is not one topic segment"})
                .as_object().unwrap().clone());
            return self.emit("directory_rejected", Value::Object(f));
        }
        if payload.is_empty() {
            let was_known = self.directory.remove(nid).is_some();
            let known = self.known();
            f.extend(json!({"nodeId": nid, "online": false, "agents": [], "known": known,
                            "cleared": true, "wasKnown": was_known}).as_object().unwrap().clone());
            self.emit("directory_updated", Value::Object(f));
            if nid == self.node_id {
                let own = self.executors();
                self.directory.insert(self.node_id.clone(), (true, own));
                self.announce();   // our own entry was cleared: say we are here again
            }
            return;
        }
        let parsed: Result<(bool, Vec<String>), String> = (|| {
            let v: Value = serde_json::from_slice(payload).map_err(|e| format!("not JSON: {e}"))?;
            let o = v.as_object().ok_or("not a JSON object")?;
            if o.get("nodeId").and_then(|x| x.as_str()) != Some(nid) {
                return Err(format!("nodeId does not match the topic's {nid}"));
            }
            let online = o.get("online").and_then(|x| x.as_bool()).ok_or("online must be a boolean")?;
            if !matches!(o.get("namespace"), Some(Value::String(_)) | Some(Value::Null)) {
                return Err("namespace must be a string or null".into());
            }
            let list = o.get("agents").and_then(|x| x.as_array()).ok_or("agents must be a list")?;
            let mut agents = vec![];
            for a in list {
                match a.get("agentId").and_then(|x| x.as_str()) {
                    Some(id) if !id.is_empty() => agents.push(id.to_string()),
                    _ => return Err("every agent needs a non-empty agentId".into()),
                }
            }
            Ok((online, agents))
        })();
        match parsed {
            Err(reason) => {
                f.extend(json!({"topic": topic, "reason": reason}).as_object().unwrap().clone());
                self.emit("directory_rejected", Value::Object(f));
            }
            Ok((online, agents)) => {
                self.directory.insert(nid.to_string(), (online, agents.clone()));
                let known = self.known();
                f.extend(json!({"nodeId": nid, "online": online, "agents": agents, "known": known})
                    .as_object().unwrap().clone());
                self.emit("directory_updated", Value::Object(f));
            }
        }
    }

    // -- tasks (§1.11) -----------------------------------------------------------------------
    fn on_request(&mut self, env: &Envelope) {
        let task_id = env.header("requestId").unwrap_or(&env.message_id).to_string();
        if let Some(existing) = self.tasks.get(&task_id) {
            let finished = TERMINAL.contains(&existing.state.as_str());
            let state = existing.state.clone();
            self.emit("task_duplicate", json!({"taskId": task_id, "messageId": env.message_id,
                "state": state,
                "action": if finished { "resend stored result" } else { "still running; not re-run" }}));
            if finished {
                self.respond(&task_id);
            }
            return;
        }
        let agent = env.to_agent_id.clone().unwrap_or_else(|| DEFAULT_EXECUTOR.into());
        let reply = env.header("replyNodeId").map(str::trim).filter(|s| !s.is_empty()).map(String::from);
        let timeout = env
            .payload
            .get("timeoutMs")
            .and_then(|t| t.as_i64())
            .filter(|t| *t > 0 && env.payload["timeoutMs"].is_number())
            .unwrap_or(self.task_timeout_ms);
        if reply.is_none() {
            self.emit("warning", json!({"what": "missing replyNodeId", "taskId": task_id,
                "messageId": env.message_id,
                "reason": "request has no headers.replyNodeId: its TASK_RESPONSE cannot be routed back"}));
        }
        let task = Task {
            agent_id: agent.clone(),
            state: "RUNNING".into(),
            requester: env.from_agent_id.clone(),
            reply_node: reply.clone(),
            conversation: env.conversation_id.clone(),
            result: Value::Null,
            error: None,
        };
        self.tasks.insert(task_id.clone(), task);
        self.save_tasks();   // durable before it is reported, and before the PUBACK
        self.emit("task_state", json!({"taskId": task_id, "agentId": agent, "state": "SUBMITTED",
                                       "previous": null, "error": null}));
        self.emit("task_state", json!({"taskId": task_id, "agentId": agent, "state": "RUNNING",
                                       "previous": "SUBMITTED", "error": null}));
        self.emit("task_executed", json!({"taskId": task_id, "agentId": agent,
            "conversationId": env.conversation_id, "messageId": env.message_id}));
        self.watchdogs.insert(task_id.clone(), Instant::now() + Duration::from_millis(timeout as u64));
        if let Some(conv) = &env.conversation_id {
            self.flows.insert(task_id.clone(), Flow {
                stream: format!("{conv}|{agent}"),
                conversation: conv.clone(),
                agent_id: agent.clone(),
                home: reply,
                requester: env.from_agent_id.clone(),
                task_id: task_id.clone(),
            });
        }
        self.emit("agent_called", json!({"taskId": task_id, "agentId": agent,
                                         "conversationId": env.conversation_id}));
    }

    fn finish(&mut self, task_id: &str, state: &str, result: Value, error: Option<String>) {
        let Some(task) = self.tasks.get_mut(task_id) else { return };
        let previous = std::mem::replace(&mut task.state, state.to_string());
        task.result = result;
        task.error = error.clone();
        let agent = task.agent_id.clone();
        self.watchdogs.remove(task_id);
        self.save_tasks();
        self.emit("task_state", json!({"taskId": task_id, "agentId": agent, "state": state,
                                       "previous": previous, "error": error}));
        self.respond(task_id);
    }

    fn on_task_finished(&mut self, op: &Value) -> Result<(), String> {
        let task_id = op.get("task_id").and_then(|x| x.as_str()).ok_or("task_id must be a string")?;
        let ok = op.get("ok").and_then(|x| x.as_bool()).ok_or("ok must be true or false")?;
        let running = self.tasks.get(task_id).map(|t| t.state.clone());
        if running.as_deref() != Some("RUNNING") {
            let reason = if running.is_none() { "unknown task" } else { "task already terminal" };
            self.emit("task_late_result", json!({"taskId": task_id, "ok": ok, "state": running,
                                                 "reason": reason}));
            return Ok(());
        }
        if self.streaming.remove(task_id) {
            // the stream ends with its task: complete or error, after pending thinking
            self.flow(task_id, if ok { "complete" } else { "error" }, "");
        }
        self.flows.remove(task_id);
        let result = op.get("result").cloned().unwrap_or(Value::Null);
        let error = op.get("error").and_then(|e| e.as_str()).map(String::from);
        self.finish(task_id, if ok { "COMPLETED" } else { "FAILED" }, result, error);
        Ok(())
    }

    /// W-TASK-4: to the node the request named, and only there.
    fn respond(&mut self, task_id: &str) {
        let task = self.tasks[task_id].clone();
        let mut headers = BTreeMap::new();
        headers.insert("requestId".to_string(), task_id.to_string());
        let env = Envelope {
            message_id: self.new_message_id(),
            from_agent_id: task.agent_id.clone(),
            message_type: "TASK_RESPONSE".into(),
            timestamp: self.now_ms(),
            conversation_id: task.conversation.clone(),
            scene_group_id: None,
            to_agent_id: Some(task.requester.clone()),
            target_node_id: task.reply_node.clone(),
            payload: json!({"status": task.state, "result": task.result, "error": task.error}),
            headers,
        };
        self.send(env, true);
    }

    // -- FLOW-RELAY, the producing side (§1.13) ----------------------------------------------
    fn flow(&mut self, task_id: &str, kind: &str, text: &str) {
        let Some(flow) = self.flows.get(task_id) else {
            let reason = if self.tasks.contains_key(task_id) {
                "its task has no conversation to stream to"
            } else {
                "no running task with that id on this node"
            };
            self.emit("relay_dropped", json!({"taskId": task_id, "flowKind": kind, "reason": reason}));
            return;
        };
        let (stream, conv, agent) = (flow.stream.clone(), flow.conversation.clone(), flow.agent_id.clone());
        self.streaming.insert(task_id.to_string());
        self.emit("flow_emitted", json!({"stream": stream, "conversationId": conv, "agentId": agent,
                                         "taskId": task_id, "flowKind": kind, "text": text}));
        if kind == "thinking" {
            let pending = self.thinking.entry(stream.clone()).or_insert_with(|| Thinking {
                due: Instant::now() + THINKING_WINDOW,
                text: String::new(),
                task_id: task_id.to_string(),
            });
            pending.text.push_str(text);
            if pending.text.len() >= THINKING_MAX_BYTES {
                self.flush_thinking(&stream);
            }
            return;
        }
        self.flush_thinking(&stream);
        self.frame(task_id, kind, text);
    }

    fn flush_thinking(&mut self, stream: &str) {
        if let Some(t) = self.thinking.remove(stream) {
            self.frame(&t.task_id, "thinking", &t.text);
        }
    }

    fn frame(&mut self, task_id: &str, kind: &str, text: &str) {
        let Some(flow) = self.flows.get(task_id) else { return };
        let (stream, conv, agent, home, requester) = (flow.stream.clone(), flow.conversation.clone(),
            flow.agent_id.clone(), flow.home.clone(), flow.requester.clone());
        let tid = flow.task_id.clone();
        let seq = self.out_seq.get(&stream).copied().unwrap_or(0) + 1;
        self.out_seq.insert(stream.clone(), seq);
        let seqs: Map<String, Value> = self.out_seq.iter().map(|(k, v)| (k.clone(), json!(v))).collect();
        store::write(&self.data_dir, store::RELAY, &json!({"out": seqs}));   // before it leaves
        self.emit("relay_frame", json!({"stream": stream, "streamSeq": seq, "flowKind": kind,
                                        "text": text, "conversationId": conv, "taskId": tid}));
        let Some(home) = home else {
            self.emit("relay_dropped", json!({"stream": stream, "streamSeq": seq,
                "reason": "no local subscriber and no home node to relay to"}));
            return;
        };
        let env = Envelope {
            message_id: self.new_message_id(),
            from_agent_id: agent.clone(),
            message_type: "FLOW_EVENT".into(),
            timestamp: self.now_ms(),
            conversation_id: Some(conv.clone()),
            scene_group_id: None,
            to_agent_id: Some(requester),
            target_node_id: Some(home.clone()),
            payload: json!({"stream": stream, "seq": seq, "kind": kind, "text": text,
                            "lane": format!("{agent}:pi-{tid}:act-1:{kind}")}),
            headers: BTreeMap::new(),
        };
        self.emit("relay_sent", json!({"stream": stream, "streamSeq": seq, "messageId": env.message_id,
                                       "conversationId": conv, "homeNodeId": home}));
        self.send(env, true);
    }

    // -- operations on stdin (§2.3) ----------------------------------------------------------
    /// Returns false when the node is told to stop.
    fn on_line(&mut self, line: &str) -> bool {
        let op: Value = match serde_json::from_str(line) {
            Ok(v) => v,
            Err(e) => {
                self.harness_error(&format!("an operation line is not JSON: {e}"), "?");
                return true;
            }
        };
        let kind = op.get("op").and_then(|k| k.as_str()).unwrap_or("").to_string();
        let result: Result<(), String> = match kind.as_str() {
            "stop" => return false,
            "task_finished" => self.on_task_finished(&op),
            "flow" => match (op.get("task_id").and_then(|x| x.as_str()), op.get("kind").and_then(|x| x.as_str()),
                             op.get("text").and_then(|x| x.as_str())) {
                (Some(t), Some(k), Some(x)) => {
                    let (t, k, x) = (t.to_string(), k.to_string(), x.to_string());
                    self.flow(&t, &k, &x);
                    Ok(())
                }
                _ => Err("flow needs task_id, kind and text".into()),
            },
            "keys" => self.rotate_keys(&op),
            "clock_skew" => match op.get("skew_ms").and_then(|s| s.as_f64()) {
                Some(s) => {
                    self.skew_ms = s;
                    Ok(())
                }
                None => Err("clock_skew needs skew_ms".into()),
            },
            "step_finished" | "human_decided" => Err("this node runs no process instances or gates".into()),
            "request" | "event" => Err("this node is an executor only: it sends no requests or group events".into()),
            "tab" => Err("this node has no browser tabs".into()),
            other => Err(format!("operation {other:?} is not supported by this node")),
        };
        if let Err(e) = result {
            self.harness_error(&e, &kind);
        }
        true
    }

    fn rotate_keys(&mut self, op: &Value) -> Result<(), String> {
        let hexmap = |v: Option<&Value>| -> Result<BTreeMap<String, Vec<u8>>, String> {
            let mut out = BTreeMap::new();
            if let Some(m) = v.and_then(|m| m.as_object()) {
                for (k, h) in m {
                    let key = h.as_str().and_then(wire::key_from_hex).ok_or(format!("key {k} is not hex"))?;
                    out.insert(k.clone(), key);
                }
            }
            Ok(out)
        };
        let flat = match op.get("flat") {
            Some(Value::String(h)) => Some(wire::key_from_hex(h).ok_or("flat is not hex")?),
            _ => None,
        };
        self.keys = Keys { flat, agents: hexmap(op.get("agents"))?, previous: hexmap(op.get("previous"))? };
        let kids: Vec<&String> = self.keys.agents.keys().collect();
        let overlap: Vec<&String> = self.keys.previous.keys().collect();
        let line = json!({"kids": kids, "flat": self.keys.flat.is_some(), "overlapKids": overlap});
        self.emit("keys_rotated", line);
        Ok(())
    }

    // -- the loop ------------------------------------------------------------------------------
    fn next_deadline(&self) -> Instant {
        let mut next = self.next_flush;
        if let Some(r) = self.reconnect_at {
            next = next.min(r);
        }
        for d in self.watchdogs.values() {
            next = next.min(*d);
        }
        for t in self.thinking.values() {
            next = next.min(t.due);
        }
        next.min(Instant::now() + Duration::from_millis(500))   // keepalive checks
    }

    fn on_timers(&mut self) {
        let now = Instant::now();
        if self.reconnect_at.map_or(false, |r| r <= now) {
            self.connect();
        }
        if self.next_flush <= now {
            self.flush_ledger();
        }
        let due: Vec<String> = self.watchdogs.iter().filter(|(_, d)| **d <= now).map(|(k, _)| k.clone()).collect();
        for task_id in due {
            self.watchdogs.remove(&task_id);
            self.streaming.remove(&task_id);
            self.flows.remove(&task_id);
            self.finish(&task_id, "TIMEOUT", Value::Null, Some("timeout".into()));
        }
        let ripe: Vec<String> = self.thinking.iter().filter(|(_, t)| t.due <= now).map(|(k, _)| k.clone()).collect();
        for stream in ripe {
            self.flush_thinking(&stream);
        }
        if self.connected {
            if now.duration_since(self.last_recv) > Duration::from_millis(KEEPALIVE_S as u64 * 1500) {
                // the broker has said nothing for 1.5 keepalives: the link is dead, even if
                // nothing closed it (a blackhole)
                if let Some(s) = &self.conn {
                    mqtt::close(s);
                }
            } else if now.duration_since(self.last_sent) >= Duration::from_secs(KEEPALIVE_S as u64) {
                self.write(&mqtt::pingreq_packet());
            }
        }
    }

    fn run(&mut self, rx: mpsc::Receiver<Msg>) {
        loop {
            let wait = self.next_deadline().saturating_duration_since(Instant::now());
            match rx.recv_timeout(wait) {
                Ok(Msg::Line(line)) => {
                    if !self.on_line(&line) {
                        break;
                    }
                }
                Ok(Msg::Eof) => break,   // the bench went away: stop cleanly (P-LIFE-2)
                Ok(Msg::Mqtt(mqtt::Incoming::Packet(gen, p))) => self.on_packet(gen, p),
                Ok(Msg::Mqtt(mqtt::Incoming::Closed(gen, why))) => self.on_closed(gen, why),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => break,
            }
            self.on_timers();
        }
        // a clean stop: DISCONNECT (no will), the ledger on disk, exit 0
        self.flush_ledger();
        if self.connected {
            self.write(&mqtt::disconnect_packet());
        }
        if let Some(s) = &self.conn {
            mqtt::close(s);
        }
    }
}

fn boot_id() -> String {
    let mut bytes = [0u8; 6];
    if let Ok(mut f) = std::fs::File::open("/dev/urandom") {
        use std::io::Read;
        let _ = f.read_exact(&mut bytes);
    }
    wire::hex(&bytes)
}

fn spec_error(why: &str) -> ! {
    eprintln!("a2a-rust-node: the launch spec (first stdin line): {why}");
    std::process::exit(3);
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let bug = match args.iter().map(String::as_str).collect::<Vec<_>>().as_slice() {
        [] => false,
        ["--bug", "memory-dedup"] => true,
        _ => {
            eprintln!("usage: a2a-rust-node [--bug memory-dedup]\n\
                       The launch spec is the first line on stdin, operations follow (docs/PROTOCOL.md).");
            std::process::exit(2);
        }
    };
    unsafe_ignore_sigint();
    let stdin = io::stdin();
    let mut lines = stdin.lock();
    let mut first = String::new();
    if lines.read_line(&mut first).unwrap_or(0) == 0 {
        spec_error("stdin ended before the launch spec");
    }
    let spec: Value = serde_json::from_str(&first).unwrap_or_else(|e| spec_error(&format!("not JSON: {e}")));
    let s = |path: &[&str]| -> Value {
        let mut v = &spec;
        for p in path {
            v = v.get(*p).unwrap_or_else(|| spec_error(&format!("{} is missing", path.join("."))));
        }
        v.clone()
    };
    let text = |path: &[&str]| -> String {
        s(path).as_str().map(String::from).unwrap_or_else(|| spec_error(&format!("{} must be a string", path.join("."))))
    };
    let node_id = text(&["node", "node_id"]);
    let client_id = match text(&["node", "client_id"]) {
        c if c.is_empty() => node_id.clone(),
        c => c,
    };
    let login = spec.get("login").cloned().unwrap_or(Value::Null);
    let username = login.get(0).and_then(|u| u.as_str()).map(String::from).unwrap_or_else(|| client_id.clone());
    let password = login.get(1).and_then(|p| p.as_str()).map(String::from);
    let hexkey = |v: &Value, what: &str| -> Vec<u8> {
        v.as_str().and_then(wire::key_from_hex).unwrap_or_else(|| spec_error(&format!("{what} must be hex")))
    };
    let auth = s(&["auth"]);
    let flat = match auth.get("flat") {
        Some(Value::Null) | None => None,
        Some(v) => Some(hexkey(v, "auth.flat")),
    };
    let agents_keys: BTreeMap<String, Vec<u8>> = auth
        .get("agents")
        .and_then(|m| m.as_object())
        .map(|m| m.iter().map(|(k, v)| (k.clone(), hexkey(v, "auth.agents"))).collect())
        .unwrap_or_default();
    let broker = s(&["broker"]);
    let broker = (
        broker.get(0).and_then(|h| h.as_str()).unwrap_or_else(|| spec_error("broker[0] must be a host")).to_string(),
        broker.get(1).and_then(|p| p.as_u64()).unwrap_or_else(|| spec_error("broker[1] must be a port")) as u16,
    );
    if spec.get("tls").map_or(false, |t| !t.is_null()) {
        spec_error("tls: this node speaks plain TCP only");
    }
    let (tx, rx) = mpsc::channel();
    let mut node = Node {
        node_id: node_id.clone(),
        namespace: text(&["node", "namespace"]),
        configured: str_list(&s(&["node", "agents"])),
        scene_groups: str_list(&s(&["node", "scene_groups"])),
        client_id,
        prefix: text(&["node", "prefix"]),
        task_timeout_ms: s(&["node", "task_timeout_ms"]).as_i64().unwrap_or(60_000),
        auth_mode: text(&["auth", "mode"]),
        sign_version: text(&["auth", "version"]),
        max_skew_ms: s(&["auth", "max_skew_ms"]).as_i64().unwrap_or(300_000),
        keys: Keys { flat, agents: agents_keys, previous: BTreeMap::new() },
        data_dir: PathBuf::from(text(&["data_dir"])),
        broker,
        t0_ms: s(&["t0"]).as_f64().unwrap_or_else(|| spec_error("t0 must be a number")) * 1000.0,
        username,
        password,
        bug_memory_dedup: bug,
        boot_id: boot_id(),
        sent: 0,
        skew_ms: 0.0,
        roster: vec![],
        default_executor: false,
        directory: BTreeMap::new(),
        ledger: HashMap::new(),
        ledger_dirty: false,
        evicted_total: 0,
        expired_total: 0,
        next_flush: Instant::now() + LEDGER_FLUSH,
        tasks: BTreeMap::new(),
        watchdogs: HashMap::new(),
        flows: HashMap::new(),
        streaming: HashSet::new(),
        out_seq: BTreeMap::new(),
        thinking: HashMap::new(),
        tx: tx.clone(),
        conn: None,
        gen: 0,
        connected: false,
        reconnect_at: None,
        last_sent: Instant::now(),
        last_recv: Instant::now(),
        next_pkid: 0,
        sub_pkid: 0,
        inflight: BTreeMap::new(),
        queue: VecDeque::new(),
        out: io::stdout(),
    };
    let tabs = spec.get("tabs").and_then(|t| t.as_array()).map_or(0, |t| t.len());
    drop(lines);
    thread::spawn(move || {
        let stdin = io::stdin();
        for line in stdin.lock().lines() {
            match line {
                Ok(l) if l.trim().is_empty() => continue,
                Ok(l) => {
                    if tx.send(Msg::Line(l)).is_err() {
                        return;
                    }
                }
                Err(_) => break,
            }
        }
        let _ = tx.send(Msg::Eof);
    });
    node.boot();
    if tabs > 0 {
        node.harness_error("this node has no browser tabs: the spec's tabs are not attached", "tabs");
    }
    node.run(rx);
}

/// P-RUN-4: Ctrl-C in the bench's terminal is the bench's to handle.
fn unsafe_ignore_sigint() {
    extern "C" {
        fn signal(signum: i32, handler: usize) -> usize;
    }
    const SIGINT: i32 = 2;
    const SIG_IGN: usize = 1;
    // SAFETY: installing SIG_IGN for SIGINT has no preconditions
    unsafe {
        signal(SIGINT, SIG_IGN);
    }
}
