//! The envelope (PROTOCOL.md §1.4) and its signatures (§1.5).

use hmac::{Hmac, Mac};
use serde_json::{Map, Value};
#[cfg(test)]
use serde_json::json;
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;

pub const TYPES: [&str; 9] = [
    "TASK_REQUEST", "TASK_RESPONSE", "DATA_REQUEST", "DATA_RESPONSE", "FLOW_EVENT",
    "GATE_OPEN", "GATE_DECISION", "GATE_ACK", "EVENT",
];
const FIELDS: [&str; 10] = [
    "messageId", "fromAgentId", "messageType", "timestamp", "conversationId", "sceneGroupId",
    "toAgentId", "targetNodeId", "payload", "headers",
];
pub const MAX_BYTES: usize = 1 << 20;

#[derive(Clone, Debug)]
pub struct Envelope {
    pub message_id: String,
    pub from_agent_id: String,
    pub message_type: String,
    pub timestamp: i64,
    pub conversation_id: Option<String>,
    pub scene_group_id: Option<String>,
    pub to_agent_id: Option<String>,
    pub target_node_id: Option<String>,
    pub payload: Value,
    pub headers: BTreeMap<String, String>,
}

fn opt(v: &Option<String>) -> Value {
    v.as_ref().map(|s| Value::String(s.clone())).unwrap_or(Value::Null)
}

impl Envelope {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).map(|s| s.as_str())
    }

    /// All ten fields, absent ones as null (W-ENV-2).
    pub fn to_value(&self) -> Value {
        let mut m = Map::new();
        m.insert("messageId".into(), Value::String(self.message_id.clone()));
        m.insert("fromAgentId".into(), Value::String(self.from_agent_id.clone()));
        m.insert("messageType".into(), Value::String(self.message_type.clone()));
        m.insert("timestamp".into(), Value::from(self.timestamp));
        m.insert("conversationId".into(), opt(&self.conversation_id));
        m.insert("sceneGroupId".into(), opt(&self.scene_group_id));
        m.insert("toAgentId".into(), opt(&self.to_agent_id));
        m.insert("targetNodeId".into(), opt(&self.target_node_id));
        m.insert("payload".into(), self.payload.clone());
        let h: Map<String, Value> =
            self.headers.iter().map(|(k, v)| (k.clone(), Value::String(v.clone()))).collect();
        m.insert("headers".into(), Value::Object(h));
        Value::Object(m)
    }

    pub fn encode(&self) -> Vec<u8> {
        canonical(&self.to_value()).into_bytes()
    }
}

/// W-ENV-3. serde_json (without `preserve_order`) keeps object keys in a BTreeMap, so they
/// come out sorted by code point; it writes non-ASCII raw and escapes control characters as
/// `\u00xx` in lowercase, as Python's json.dumps(ensure_ascii=False) does. Floats can differ
/// from Python's repr (open question Q3); this node never writes a float of its own.
pub fn canonical(v: &Value) -> String {
    serde_json::to_string(v).expect("a JSON value always serialises")
}

/// Why bytes are not an envelope: (code, detail), as in W-ENV-1 and §1.9 step 2.
pub type Rejection = (&'static str, String);

fn nonempty_opt(m: &Map<String, Value>, key: &str) -> Result<Option<String>, Rejection> {
    match m.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if !s.is_empty() => Ok(Some(s.clone())),
        Some(other) => Err(("BAD_FIELD", format!("{key} must be a non-empty string or null, not {other}"))),
    }
}

fn required_str(m: &Map<String, Value>, key: &str) -> Result<String, Rejection> {
    match m.get(key) {
        None => Err(("MISSING_FIELD", format!("{key} is missing"))),
        Some(Value::String(s)) if !s.is_empty() => Ok(s.clone()),
        Some(other) => Err(("BAD_FIELD", format!("{key} must be a non-empty string, not {other}"))),
    }
}

/// W-ENV-1 (the payload's shape is `check_payload`). serde_json already refuses NaN/Infinity, a number beyond a double
/// (1e400) and a lone surrogate escape, so those are NOT_JSON here as the protocol asks.
pub fn decode(bytes: &[u8]) -> Result<Envelope, Rejection> {
    if bytes.len() > MAX_BYTES {
        return Err(("TOO_LARGE", format!("{} bytes is over 1 MiB", bytes.len())));
    }
    let text = std::str::from_utf8(bytes).map_err(|e| ("NOT_UTF8", e.to_string()))?;
    let value: Value = serde_json::from_str(text).map_err(|e| ("NOT_JSON", e.to_string()))?;
    let m = match value {
        Value::Object(m) => m,
        _ => return Err(("NOT_OBJECT", "the message is not a JSON object".into())),
    };
    for k in m.keys() {
        if !FIELDS.contains(&k.as_str()) {
            return Err(("UNKNOWN_FIELD", format!("unknown field {k}")));
        }
    }
    let message_id = required_str(&m, "messageId")?;
    let from_agent_id = required_str(&m, "fromAgentId")?;
    let message_type = match m.get("messageType") {
        None => return Err(("MISSING_FIELD", "messageType is missing".into())),
        Some(Value::String(s)) if TYPES.contains(&s.as_str()) => s.clone(),
        Some(Value::String(s)) => return Err(("UNKNOWN_TYPE", format!("messageType {s} is unknown"))),
        Some(other) => return Err(("BAD_FIELD", format!("messageType must be a string, not {other}"))),
    };
    let timestamp = match m.get("timestamp") {
        None => return Err(("MISSING_FIELD", "timestamp is missing".into())),
        Some(Value::Number(n)) if n.is_i64() && n.as_i64().unwrap() >= 0 => n.as_i64().unwrap(),
        Some(Value::Number(n)) if n.is_u64() => {
            return Err(("BAD_FIELD", format!("timestamp {n} is too large")))
        }
        Some(other) => return Err(("BAD_FIELD", format!("timestamp must be an integer >= 0, not {other}"))),
    };
    let mut headers = BTreeMap::new();
    match m.get("headers") {
        None | Some(Value::Null) => {}
        Some(Value::Object(h)) => {
            for (k, v) in h {
                match v {
                    Value::String(s) => {
                        headers.insert(k.clone(), s.clone());
                    }
                    other => return Err(("BAD_FIELD", format!("header {k} must be a string, not {other}"))),
                }
            }
        }
        Some(other) => return Err(("BAD_FIELD", format!("headers must be an object, not {other}"))),
    }
    let env = Envelope {
        message_id,
        from_agent_id,
        message_type,
        timestamp,
        conversation_id: nonempty_opt(&m, "conversationId")?,
        scene_group_id: nonempty_opt(&m, "sceneGroupId")?,
        to_agent_id: nonempty_opt(&m, "toAgentId")?,
        target_node_id: nonempty_opt(&m, "targetNodeId")?,
        payload: m.get("payload").cloned().unwrap_or(Value::Null),
        headers,
    };
    Ok(env)
}

fn nonempty(v: Option<&Value>) -> bool {
    matches!(v, Some(Value::String(s)) if !s.is_empty())
}

fn one_of(v: Option<&Value>, allowed: &[&str]) -> bool {
    matches!(v, Some(Value::String(s)) if allowed.contains(&s.as_str()))
}

/// W-ENV-4: the payload fits its type, whatever the type, before admission.
pub fn check_payload(env: &Envelope) -> Result<(), Rejection> {
    let p = env.payload.as_object();
    let bad = |why: &str| Err(("BAD_FIELD", format!("{} payload: {why}", env.message_type)));
    match env.message_type.as_str() {
        "TASK_RESPONSE" => match p {
            Some(p) if one_of(p.get("status"), &["COMPLETED", "FAILED", "TIMEOUT", "CANCELLED"]) => Ok(()),
            _ => bad("status must be COMPLETED, FAILED, TIMEOUT or CANCELLED"),
        },
        "FLOW_EVENT" => match p {
            Some(p)
                if nonempty(p.get("stream"))
                    && matches!(p.get("seq"), Some(Value::Number(n)) if n.as_i64().map_or(false, |s| s > 0))
                    && one_of(p.get("kind"), &["token", "thinking", "step", "artifact", "complete", "error"])
                    && matches!(p.get("text"), Some(Value::String(_)))
                    && nonempty(p.get("lane"))
                    && env.conversation_id.is_some() =>
            {
                Ok(())
            }
            _ => bad("needs stream, seq > 0, kind, text, lane and a conversationId"),
        },
        "GATE_OPEN" => match p {
            Some(p)
                if ["gateId", "processInstId", "activityId", "agentId"].iter().all(|k| nonempty(p.get(*k)))
                    && matches!(p.get("timeoutMs"), Some(Value::Number(n)) if n.as_i64().map_or(false, |t| t > 0))
                    && one_of(p.get("onTimeout"), &["reject", "fail"])
                    && matches!(p.get("prompt"), None | Some(Value::String(_))) =>
            {
                Ok(())
            }
            _ => bad("needs gateId, processInstId, activityId, agentId, timeoutMs > 0, onTimeout"),
        },
        "GATE_DECISION" => match p {
            Some(p)
                if nonempty(p.get("gateId"))
                    && nonempty(p.get("processInstId"))
                    && one_of(p.get("decision"), &["approve", "reject", "expired"]) =>
            {
                Ok(())
            }
            _ => bad("needs gateId, processInstId and decision"),
        },
        "GATE_ACK" => match p {
            Some(p)
                if nonempty(p.get("gateId"))
                    && one_of(p.get("status"), &["RESUMED", "ALREADY_DECIDED", "UNKNOWN_INSTANCE", "NOT_WAITING"]) =>
            {
                Ok(())
            }
            _ => bad("needs gateId and status"),
        },
        _ => Ok(()),
    }
}

// -- signatures ---------------------------------------------------------------------------------

pub struct Keys {
    pub flat: Option<Vec<u8>>,
    pub agents: BTreeMap<String, Vec<u8>>,
    pub previous: BTreeMap<String, Vec<u8>>,
}

impl Keys {
    fn current(&self, kid: &str) -> Option<&Vec<u8>> {
        if kid == "flat" {
            self.flat.as_ref()
        } else {
            self.agents.get(kid)
        }
    }
}

/// W-SIG-3 / W-SIG-4.
pub fn signed_string(env: &Envelope, version: &str) -> Vec<u8> {
    if version == "2" {
        let mut e = env.clone();
        e.headers.remove("x-a2a-sig");
        let digest = Sha256::digest(canonical(&e.to_value()).as_bytes());
        format!("v2|{}", hex(&digest)).into_bytes()
    } else {
        format!("{}|{}|{}|{}", env.message_id, env.from_agent_id, env.message_type, env.timestamp).into_bytes()
    }
}

pub fn hmac_hex(key: &[u8], data: &[u8]) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes a key of any size");
    mac.update(data);
    hex(&mac.finalize().into_bytes())
}

/// W-SIG-1 and W-SIG-2: stamp and sign at the one exit.
pub fn sign(env: &mut Envelope, keys: &Keys, node_id: &str, version: &str) {
    let chosen = if let Some(k) = keys.agents.get(&env.from_agent_id) {
        Some((env.from_agent_id.clone(), k.clone()))
    } else {
        keys.flat.as_ref().map(|k| ("flat".to_string(), k.clone()))
    };
    env.headers.insert("x-a2a-node".into(), node_id.into());
    env.headers.remove("x-a2a-sig");
    match chosen {
        None => {
            env.headers.remove("x-a2a-kid");
            env.headers.remove("x-a2a-sv");
        }
        Some((kid, key)) => {
            env.headers.insert("x-a2a-kid".into(), kid);
            if version == "2" {
                env.headers.insert("x-a2a-sv".into(), "2".into());
            } else {
                env.headers.remove("x-a2a-sv");
            }
            let sig = hmac_hex(&key, &signed_string(env, version));
            env.headers.insert("x-a2a-sig".into(), sig);
        }
    }
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if s.len() % 2 != 0 {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| s.get(i..i + 2).and_then(|b| u8::from_str_radix(b, 16).ok()))
        .collect()
}

fn constant_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// W-SIG-6, in its order: the first match wins.
pub fn verify(env: &Envelope, keys: &Keys, now_ms: i64, max_skew_ms: i64) -> &'static str {
    let sig = match env.header("x-a2a-sig") {
        None => return "UNSIGNED",
        Some(s) => s,
    };
    let kid = env.header("x-a2a-kid").unwrap_or("");
    let current = keys.current(kid);
    let previous = keys.previous.get(kid);
    if current.is_none() && previous.is_none() {
        return "UNKNOWN_KID";
    }
    if kid != "flat" && kid != env.from_agent_id {
        return "KID_MISMATCH";
    }
    let version = match env.header("x-a2a-sv") {
        None | Some("1") => "1",
        Some("2") => "2",
        Some(_) => return "BAD_SIGNATURE",
    };
    let given = match unhex(sig) {
        Some(b) => b,
        None => return "BAD_SIGNATURE",
    };
    let data = signed_string(env, version);
    let matches = |key: &Vec<u8>| {
        let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("any key size");
        mac.update(&data);
        constant_eq(&mac.finalize().into_bytes(), &given)
    };
    if !(current.map_or(false, matches) || previous.map_or(false, matches)) {
        return "BAD_SIGNATURE";
    }
    if (now_ms - env.timestamp).abs() > max_skew_ms {
        return "STALE";
    }
    "VERIFIED"
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

pub fn key_from_hex(s: &str) -> Option<Vec<u8>> {
    unhex(s)
}

/// W-ID-4: one non-empty MQTT topic segment.
pub fn segment_ok(s: &str) -> bool {
    !s.is_empty() && !s.contains(['/', '+', '#', '\0'])
}

#[cfg(test)]
mod tests {
    //! The known-answer vectors every implementation shares (tests/data/signature_vectors.json).
    use super::*;

    fn vectors() -> Vec<Value> {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/data/signature_vectors.json");
        let doc: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        doc["cases"].as_array().unwrap().clone()
    }

    fn keys_for(case: &Value) -> Keys {
        let key = case["key"].as_str().unwrap().as_bytes().to_vec();
        let kid = case["kid"].as_str().unwrap();
        let mut k = Keys { flat: None, agents: BTreeMap::new(), previous: BTreeMap::new() };
        if kid == "flat" {
            k.flat = Some(key);
        } else {
            k.agents.insert(kid.to_string(), key);
        }
        k
    }

    #[test]
    fn every_vector_gives_its_signed_string_signature_and_canonical_form() {
        let cases = vectors();
        assert!(cases.len() >= 6);
        for case in cases {
            let name = case["name"].as_str().unwrap();
            let bytes = serde_json::to_vec(&case["message"]).unwrap();
            let env = decode(&bytes).unwrap_or_else(|e| panic!("{name}: {e:?}"));
            let version = case["version"].as_str().unwrap();
            let signed = String::from_utf8(signed_string(&env, version)).unwrap();
            assert_eq!(signed, case["signedString"].as_str().unwrap(), "{name}");
            if let Some(c) = case.get("canonical").and_then(|c| c.as_str()) {
                let mut unsigned = env.clone();
                unsigned.headers.remove("x-a2a-sig");
                assert_eq!(canonical(&unsigned.to_value()), c, "{name}");
            }
            let keys = keys_for(&case);
            let sig = hmac_hex(&case["key"].as_str().unwrap().as_bytes(), signed.as_bytes());
            assert_eq!(sig, case["signature"].as_str().unwrap(), "{name}");
            assert_eq!(verify(&env, &keys, env.timestamp, 300_000), "VERIFIED", "{name}");
            // signing the message again from scratch gives the same signature
            let mut again = env.clone();
            let node = env.header("x-a2a-node").unwrap().to_string();
            sign(&mut again, &keys, &node, version);
            assert_eq!(again.header("x-a2a-sig"), case["signature"].as_str(), "{name}");
        }
    }

    #[test]
    fn a_changed_payload_fails_v2_only_and_a_stale_message_is_stale() {
        for case in vectors() {
            let env = decode(&serde_json::to_vec(&case["message"]).unwrap()).unwrap();
            let keys = keys_for(&case);
            let mut tampered = env.clone();
            tampered.payload = json!({"tampered": true});
            let want = if case["version"] == "2" { "BAD_SIGNATURE" } else { "VERIFIED" };
            assert_eq!(verify(&tampered, &keys, env.timestamp, 300_000), want);
            assert_eq!(verify(&env, &keys, env.timestamp + 300_001, 300_000), "STALE");
            let none = Keys { flat: None, agents: BTreeMap::new(), previous: BTreeMap::new() };
            assert_eq!(verify(&env, &none, env.timestamp, 300_000), "UNKNOWN_KID");
        }
    }

    #[test]
    fn what_the_protocol_calls_malformed_is_refused() {
        let base = r#"{"messageId":"m","fromAgentId":"a.b","messageType":"EVENT","timestamp":1"#;
        for (tail, code) in [
            (r#","x":1}"#, "UNKNOWN_FIELD"),
            (r#","payload":1e400}"#, "NOT_JSON"),
            (r#","payload":"\ud800"}"#, "NOT_JSON"),
            (r#","payload":NaN}"#, "NOT_JSON"),
            (r#","toAgentId":""}"#, "BAD_FIELD"),
            (r#","headers":{"a":1}}"#, "BAD_FIELD"),
        ] {
            let text = format!("{base}{tail}");
            assert_eq!(decode(text.as_bytes()).unwrap_err().0, code, "{text}");
        }
        let wrong = r#"{"messageId":"m","fromAgentId":"a.b","messageType":"NOPE","timestamp":1}"#;
        assert_eq!(decode(wrong.as_bytes()).unwrap_err().0, "UNKNOWN_TYPE");
        let boolean = r#"{"messageId":"m","fromAgentId":"a.b","messageType":"EVENT","timestamp":true}"#;
        assert_eq!(decode(boolean.as_bytes()).unwrap_err().0, "BAD_FIELD");
    }
}
