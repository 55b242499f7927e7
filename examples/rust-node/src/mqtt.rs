//! A small MQTT 3.1.1 client, enough for PROTOCOL.md §1.3: one connection, QoS 0/1,
//! a persistent session, a Last Will, and PUBACKs the node sends itself once what a
//! message wrote is on disk (write-ahead: W-MQTT-5). Reading happens on its own thread;
//! every packet is handed to the node's one loop, which does all the writing.

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream, ToSocketAddrs};
use std::sync::mpsc::Sender;
use std::thread;
use std::time::Duration;

pub struct Will {
    pub topic: String,
    pub payload: Vec<u8>,
}

pub struct ConnectSpec<'a> {
    pub client_id: &'a str,
    pub username: &'a str,
    pub password: Option<&'a str>,
    pub keepalive_s: u16,
    pub will: &'a Will,
}

/// What the reader thread hands to the node's loop.
pub enum Packet {
    ConnAck { session_present: bool, code: u8 },
    Publish { topic: String, payload: Vec<u8>, qos: u8, dup: bool, retain: bool, pkid: u16 },
    PubAck { pkid: u16 },
    SubAck { pkid: u16, codes: Vec<u8> },
    PingResp,
    Other(u8),
}

pub enum Incoming {
    Packet(u64, Packet),
    Closed(u64, String),
}

fn put_str(out: &mut Vec<u8>, s: &[u8]) {
    out.extend_from_slice(&(s.len() as u16).to_be_bytes());
    out.extend_from_slice(s);
}

fn frame(first: u8, body: &[u8]) -> Vec<u8> {
    let mut out = vec![first];
    let mut n = body.len();
    loop {
        let mut b = (n % 128) as u8;
        n /= 128;
        if n > 0 {
            b |= 0x80;
        }
        out.push(b);
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(body);
    out
}

pub fn connect_packet(c: &ConnectSpec) -> Vec<u8> {
    let mut body = Vec::new();
    put_str(&mut body, b"MQTT");
    body.push(4); // 3.1.1
    // username, will retain, will QoS1, will flag; clean session 0 (a persistent session)
    let mut flags = 0x80 | 0x20 | 0x08 | 0x04;
    if c.password.is_some() {
        flags |= 0x40;
    }
    body.push(flags);
    body.extend_from_slice(&c.keepalive_s.to_be_bytes());
    put_str(&mut body, c.client_id.as_bytes());
    put_str(&mut body, c.will.topic.as_bytes());
    put_str(&mut body, &c.will.payload);
    put_str(&mut body, c.username.as_bytes());
    if let Some(p) = c.password {
        put_str(&mut body, p.as_bytes());
    }
    frame(0x10, &body)
}

pub fn publish_packet(topic: &str, payload: &[u8], qos: u8, retain: bool, dup: bool, pkid: u16) -> Vec<u8> {
    let mut body = Vec::new();
    put_str(&mut body, topic.as_bytes());
    if qos > 0 {
        body.extend_from_slice(&pkid.to_be_bytes());
    }
    body.extend_from_slice(payload);
    let first = 0x30 | ((dup as u8) << 3) | (qos << 1) | retain as u8;
    frame(first, &body)
}

pub fn subscribe_packet(pkid: u16, filters: &[String], qos: u8) -> Vec<u8> {
    let mut body = pkid.to_be_bytes().to_vec();
    for f in filters {
        put_str(&mut body, f.as_bytes());
        body.push(qos);
    }
    frame(0x82, &body)
}

pub fn puback_packet(pkid: u16) -> Vec<u8> {
    frame(0x40, &pkid.to_be_bytes())
}

pub fn pingreq_packet() -> Vec<u8> {
    frame(0xC0, &[])
}

pub fn disconnect_packet() -> Vec<u8> {
    frame(0xE0, &[])
}

/// Open the TCP connection (TCP_NODELAY: W-MQTT-8) and start its reader thread.
pub fn open(broker: &(String, u16), gen: u64, tx: Sender<super::Msg>) -> io::Result<TcpStream> {
    let addr = (broker.0.as_str(), broker.1)
        .to_socket_addrs()?
        .next()
        .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "broker address resolves to nothing"))?;
    let stream = TcpStream::connect_timeout(&addr, Duration::from_secs(3))?;
    stream.set_nodelay(true)?;
    let mut reader = stream.try_clone()?;
    thread::spawn(move || {
        let why = loop {
            match read_packet(&mut reader) {
                Ok(p) => {
                    if tx.send(super::Msg::Mqtt(Incoming::Packet(gen, p))).is_err() {
                        return;
                    }
                }
                Err(e) => break e.to_string(),
            }
        };
        let _ = tx.send(super::Msg::Mqtt(Incoming::Closed(gen, why)));
    });
    Ok(stream)
}

pub fn close(stream: &TcpStream) {
    let _ = stream.shutdown(Shutdown::Both);
}

fn read_packet(r: &mut TcpStream) -> io::Result<Packet> {
    let mut first = [0u8; 1];
    r.read_exact(&mut first)?;
    let mut len: usize = 0;
    let mut mult: usize = 1;
    loop {
        let mut b = [0u8; 1];
        r.read_exact(&mut b)?;
        len += (b[0] & 0x7f) as usize * mult;
        if b[0] & 0x80 == 0 {
            break;
        }
        mult *= 128;
        if mult > 128 * 128 * 128 {
            return Err(io::Error::new(io::ErrorKind::InvalidData, "malformed remaining length"));
        }
    }
    let mut body = vec![0u8; len];
    r.read_exact(&mut body)?;
    let short = || io::Error::new(io::ErrorKind::InvalidData, "packet too short");
    Ok(match first[0] >> 4 {
        2 => {
            if body.len() < 2 {
                return Err(short());
            }
            Packet::ConnAck { session_present: body[0] & 1 == 1, code: body[1] }
        }
        3 => {
            let qos = (first[0] >> 1) & 3;
            if body.len() < 2 {
                return Err(short());
            }
            let tlen = u16::from_be_bytes([body[0], body[1]]) as usize;
            let mut at = 2 + tlen;
            if body.len() < at {
                return Err(short());
            }
            let topic = String::from_utf8_lossy(&body[2..at]).into_owned();
            let mut pkid = 0;
            if qos > 0 {
                if body.len() < at + 2 {
                    return Err(short());
                }
                pkid = u16::from_be_bytes([body[at], body[at + 1]]);
                at += 2;
            }
            Packet::Publish {
                topic,
                payload: body[at..].to_vec(),
                qos,
                dup: first[0] & 0x08 != 0,
                retain: first[0] & 0x01 != 0,
                pkid,
            }
        }
        4 => {
            if body.len() < 2 {
                return Err(short());
            }
            Packet::PubAck { pkid: u16::from_be_bytes([body[0], body[1]]) }
        }
        9 => {
            if body.len() < 2 {
                return Err(short());
            }
            Packet::SubAck { pkid: u16::from_be_bytes([body[0], body[1]]), codes: body[2..].to_vec() }
        }
        13 => Packet::PingResp,
        other => Packet::Other(other),
    })
}

pub fn write_all(stream: &mut TcpStream, bytes: &[u8]) -> io::Result<()> {
    stream.write_all(bytes)
}
