//! A guard between the WebSocket's byte stream and tungstenite, so that one answer the client cannot take
//! fails only its own request and the connection keeps serving the others.
//!
//! tungstenite enforces a message size limit by failing the connection: it stops after reading the frame
//! header, and reading on would buffer the whole frame however large (so the limit could not be kept), and
//! every request waiting on the socket would fail with it. The guard reads the frames first: a message over
//! `max_response_bytes` is skipped as it streams by (never held), keeping only its first bytes, where nodes
//! write the `id`; tungstenite gets a small marker message in its place ([`oversize`] reads it). Every data
//! message is handed on as binary, so a text message that is not UTF-8 is one undecodable answer for the
//! caller to attribute, not a connection error. A fragmented message (rare: nodes send one frame each) is
//! held until its last fragment and handed on as one frame.
//!
//! Only frames the node sends pass through here; what we send is written as it is. Control frames pass
//! unchanged, and so does anything that breaks the protocol (a masked frame, a continuation without a start):
//! tungstenite fails the connection for it, as it should.

use std::io;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use serde::{Deserialize, Serialize};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// The first bytes of an over-size message kept to find its id: JSON-RPC answers start with
/// `{"jsonrpc":"2.0","id":…` at the nodes we know, far within this.
const PREFIX_BYTES: usize = 256;

/// Bytes read from the socket at once.
const READ_CHUNK: usize = 64 * 1024;

/// What the marker message starts with: no JSON text starts with a NUL byte.
const MARKER: &[u8] = b"\0logslice over-size message ";

const FIN: u8 = 0x80;
const OPCODE_CONTINUATION: u8 = 0x0;
const OPCODE_TEXT: u8 = 0x1;
const OPCODE_BINARY: u8 = 0x2;

/// An over-size message the guard skipped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct Oversize {
    /// Its size in bytes.
    pub(super) size: u64,
    /// Its `id`, when its first bytes show it.
    pub(super) id: Option<u64>,
}

/// The over-size message a marker stands for; `None` for any other message.
pub(super) fn oversize(message: &[u8]) -> Option<Oversize> {
    serde_json::from_slice(message.strip_prefix(MARKER)?).ok()
}

/// The top-level `"id"` of a JSON object whose first bytes are `prefix`, if it is a number and lies there:
/// enough to attribute an answer the client cannot parse (cut short, or broken after its id).
pub(super) fn top_level_id(prefix: &[u8]) -> Option<u64> {
    let mut depth = 0usize;
    let mut i = 0;
    while i < prefix.len() {
        match prefix[i] {
            b'{' | b'[' => depth += 1,
            b'}' | b']' => depth = depth.checked_sub(1)?,
            b'"' => {
                let start = i + 1;
                let mut end = start;
                while end < prefix.len() && prefix[end] != b'"' {
                    end += if prefix[end] == b'\\' { 2 } else { 1 };
                }
                let key = prefix.get(start..end)?;
                i = end + 1;
                let value = prefix.get(i..)?.trim_ascii_start().strip_prefix(b":");
                if let (1, b"id", Some(value)) = (depth, key, value) {
                    let value = value.trim_ascii_start();
                    let digits = value.iter().take_while(|b| b.is_ascii_digit()).count();
                    // A number cut off by the prefix's end could be longer than it looks.
                    if digits == 0 || digits == value.len() {
                        return None;
                    }
                    return std::str::from_utf8(&value[..digits]).ok()?.parse().ok();
                }
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    None
}

/// Where the deframer is in the stream.
#[derive(Debug)]
enum State {
    /// Reading a frame header: its bytes so far.
    Header { bytes: [u8; 14], have: usize },
    /// Handing `remaining` payload bytes on as they come; `data`: they belong to a data message.
    Pass { remaining: u64, data: bool },
    /// Holding `remaining` payload bytes of a fragment.
    Hold { remaining: u64 },
    /// Dropping `remaining` payload bytes of an over-size message.
    Skip { remaining: u64 },
}

/// The data message being read.
#[derive(Debug, Default)]
struct Message {
    /// Payload bytes so far.
    size: u64,
    /// Its first bytes (kept for fragments and skipped messages only).
    prefix: Vec<u8>,
    /// The fragments so far, when it came in more than one frame and is within the limit.
    held: Option<Vec<u8>>,
    /// Over the limit: the rest is skipped.
    oversize: bool,
    /// Whether its frame being read is its last.
    last_frame: bool,
}

/// The frame rewriter: bytes from the node in, bytes for tungstenite out. Pure, no I/O.
#[derive(Debug)]
pub(super) struct Deframer {
    limit: u64,
    state: State,
    message: Option<Message>,
}

impl Deframer {
    /// A deframer that lets messages of up to `limit` bytes through.
    pub(super) fn new(limit: usize) -> Self {
        Self {
            limit: u64::try_from(limit).unwrap_or(u64::MAX),
            state: State::Header {
                bytes: [0; 14],
                have: 0,
            },
            message: None,
        }
    }

    /// Consumes `input`, appending what tungstenite is to read to `out`.
    pub(super) fn feed(&mut self, mut input: &[u8], out: &mut Vec<u8>) {
        while !input.is_empty() {
            match &mut self.state {
                State::Header { bytes, have } => {
                    let needed = header_len(&bytes[..*have]);
                    let n = (needed - *have).min(input.len());
                    bytes[*have..*have + n].copy_from_slice(&input[..n]);
                    *have += n;
                    input = &input[n..];
                    if *have == header_len(&bytes[..*have]) {
                        let header = *bytes;
                        let len = *have;
                        self.on_header(&header[..len], out);
                    }
                }
                State::Pass { remaining, .. }
                | State::Hold { remaining }
                | State::Skip { remaining } => {
                    let n = usize::try_from(*remaining)
                        .unwrap_or(usize::MAX)
                        .min(input.len());
                    let (payload, rest) = input.split_at(n);
                    *remaining -= n as u64;
                    input = rest;
                    let message = self.message.as_mut();
                    match (&self.state, message) {
                        (State::Pass { .. }, _) => out.extend_from_slice(payload),
                        (State::Hold { .. }, Some(message)) => {
                            keep_prefix(message, payload);
                            message.held.get_or_insert_with(Vec::new).extend(payload);
                        }
                        (State::Skip { .. }, Some(message)) => keep_prefix(message, payload),
                        _ => unreachable!("holding and skipping belong to a message"),
                    }
                    self.end_frame_if_read(out);
                }
            }
        }
    }

    /// Decides what to do with the frame whose header is `header`.
    fn on_header(&mut self, header: &[u8], out: &mut Vec<u8>) {
        let (first, second) = (header[0], header[1]);
        let opcode = first & 0x0f;
        let last_frame = first & FIN != 0;
        let masked = second & 0x80 != 0;
        let reserved = first & 0x70 != 0;
        let len = payload_len(header);
        let starts = opcode == OPCODE_TEXT || opcode == OPCODE_BINARY;
        let continues = opcode == OPCODE_CONTINUATION;
        let in_order = (starts && self.message.is_none()) || (continues && self.message.is_some());
        if masked || reserved || !in_order || !(starts || continues) {
            // A control frame, or a protocol error for tungstenite to report: unchanged.
            out.extend_from_slice(header);
            self.state = State::Pass {
                remaining: len,
                data: false,
            };
            return self.end_frame_if_read(out);
        }
        let message = self.message.get_or_insert_with(Message::default);
        message.size = message.size.saturating_add(len);
        message.last_frame = last_frame;
        self.state = if message.oversize || message.size > self.limit {
            message.oversize = true;
            message.held = None;
            State::Skip { remaining: len }
        } else if starts && last_frame {
            // The usual case: a whole message in one frame, handed on as it streams (as binary, so that
            // tungstenite does not fail the connection for text that is not UTF-8).
            push_header(out, OPCODE_BINARY, len);
            State::Pass {
                remaining: len,
                data: true,
            }
        } else {
            message.held.get_or_insert_with(Vec::new);
            State::Hold { remaining: len }
        };
        self.end_frame_if_read(out);
    }

    /// After a frame's payload is all read: reads the next header, and ends the message after its last
    /// frame (handing on what was held, or the marker of a skipped message).
    fn end_frame_if_read(&mut self, out: &mut Vec<u8>) {
        let data = match self.state {
            State::Pass { remaining: 0, data } => data,
            State::Hold { remaining: 0 } | State::Skip { remaining: 0 } => true,
            _ => return,
        };
        self.state = State::Header {
            bytes: [0; 14],
            have: 0,
        };
        if !data || !self.message.as_ref().is_some_and(|m| m.last_frame) {
            return;
        }
        let message = self.message.take().expect("checked above");
        if message.oversize {
            let marker = Oversize {
                size: message.size,
                id: top_level_id(&message.prefix),
            };
            let mut payload = MARKER.to_vec();
            payload.extend(serde_json::to_vec(&marker).expect("a plain struct serializes"));
            push_header(out, OPCODE_BINARY, payload.len() as u64);
            out.extend(payload);
        } else if let Some(held) = message.held {
            push_header(out, OPCODE_BINARY, held.len() as u64);
            out.extend(held);
        }
    }
}

fn keep_prefix(message: &mut Message, payload: &[u8]) {
    let room = PREFIX_BYTES.saturating_sub(message.prefix.len());
    message
        .prefix
        .extend_from_slice(&payload[..room.min(payload.len())]);
}

/// The length of the header that starts with `bytes` (2 until its second byte is known).
fn header_len(bytes: &[u8]) -> usize {
    let Some(&second) = bytes.get(1) else {
        return 2;
    };
    let extended = match second & 0x7f {
        126 => 2,
        127 => 8,
        _ => 0,
    };
    let mask = if second & 0x80 != 0 { 4 } else { 0 };
    2 + extended + mask
}

fn payload_len(header: &[u8]) -> u64 {
    match header[1] & 0x7f {
        126 => u64::from(u16::from_be_bytes([header[2], header[3]])),
        127 => u64::from_be_bytes(header[2..10].try_into().expect("8 bytes")),
        short => u64::from(short),
    }
}

/// A final, unmasked frame header (as a server sends it).
fn push_header(out: &mut Vec<u8>, opcode: u8, len: u64) {
    out.push(FIN | opcode);
    match len {
        0..=125 => out.push(len as u8),
        126..=0xffff => {
            out.push(126);
            out.extend((len as u16).to_be_bytes());
        }
        _ => {
            out.push(127);
            out.extend(len.to_be_bytes());
        }
    }
}

/// A stream whose incoming bytes pass the [`Deframer`]; writes go through unchanged.
pub(super) struct Guarded<S> {
    inner: S,
    deframer: Deframer,
    /// Bytes for tungstenite not read yet, from `out_pos` on.
    out: Vec<u8>,
    out_pos: usize,
    read_chunk: Box<[u8]>,
}

impl<S> Guarded<S> {
    pub(super) fn new(inner: S, limit: usize) -> Self {
        Self {
            inner,
            deframer: Deframer::new(limit),
            out: Vec::new(),
            out_pos: 0,
            read_chunk: vec![0; READ_CHUNK].into_boxed_slice(),
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Guarded<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if buf.remaining() == 0 {
            return Poll::Ready(Ok(()));
        }
        loop {
            if this.out_pos < this.out.len() {
                let n = buf.remaining().min(this.out.len() - this.out_pos);
                buf.put_slice(&this.out[this.out_pos..this.out_pos + n]);
                this.out_pos += n;
                if this.out_pos == this.out.len() {
                    this.out.clear();
                    this.out_pos = 0;
                }
                return Poll::Ready(Ok(()));
            }
            let mut chunk = ReadBuf::new(&mut this.read_chunk[..]);
            ready!(Pin::new(&mut this.inner).poll_read(cx, &mut chunk))?;
            if chunk.filled().is_empty() {
                return Poll::Ready(Ok(())); // end of stream
            }
            // A chunk that was all skipped gives nothing to hand on: read the next one.
            this.deframer.feed(chunk.filled(), &mut this.out);
        }
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Guarded<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A frame as a server sends it.
    fn frame(fin: bool, opcode: u8, payload: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        push_header(&mut out, opcode, payload.len() as u64);
        if !fin {
            out[0] &= !FIN;
        }
        out.extend_from_slice(payload);
        out
    }

    fn binary(payload: &[u8]) -> Vec<u8> {
        frame(true, OPCODE_BINARY, payload)
    }

    fn marker(size: u64, id: Option<u64>) -> Vec<u8> {
        let mut payload = MARKER.to_vec();
        payload.extend(serde_json::to_vec(&Oversize { size, id }).unwrap());
        binary(&payload)
    }

    /// Feeds `input` to a deframer with `limit` in pieces of every size from 1 byte to all at once, and
    /// asserts each gives `expected`.
    fn check(limit: usize, input: &[u8], expected: &[u8]) {
        for piece in [1, 2, 3, 5, 13, 64, 1000, input.len().max(1)] {
            let mut deframer = Deframer::new(limit);
            let mut out = Vec::new();
            for chunk in input.chunks(piece) {
                deframer.feed(chunk, &mut out);
            }
            assert_eq!(out, expected, "fed in pieces of {piece}");
        }
    }

    const SMALL: &[u8] = br#"{"jsonrpc":"2.0","id":3,"result":"0x1"}"#;

    fn big(id: u64, len: usize) -> Vec<u8> {
        let mut text = format!(r#"{{"jsonrpc":"2.0","id":{id},"result":""#).into_bytes();
        text.resize(len - 2, b'a');
        text.extend(br#""}"#);
        text
    }

    #[test]
    fn messages_within_the_limit_pass_as_binary() {
        let text = frame(true, OPCODE_TEXT, SMALL);
        check(64, &text, &binary(SMALL));
        check(64, &binary(SMALL), &binary(SMALL));
        check(64, &binary(b""), &binary(b""));
        let long = big(4, 300);
        check(300, &frame(true, OPCODE_TEXT, &long), &binary(&long));
        let longer = big(4, 70_000);
        check(70_000, &binary(&longer), &binary(&longer));
    }

    #[test]
    fn an_over_size_message_becomes_a_marker_with_its_id_and_the_next_one_passes() {
        let mut input = frame(true, OPCODE_TEXT, &big(7, 200));
        input.extend(frame(true, OPCODE_TEXT, SMALL));
        let mut expected = marker(200, Some(7));
        expected.extend(binary(SMALL));
        check(100, &input, &expected);
        assert_eq!(
            oversize(&marker(200, Some(7))[2..]),
            Some(Oversize {
                size: 200,
                id: Some(7)
            })
        );
        assert_eq!(oversize(SMALL), None);
    }

    #[test]
    fn control_frames_pass_unchanged_also_between_fragments() {
        let ping = frame(true, 0x9, b"hi");
        let close = frame(true, 0x8, &[0x03, 0xe8]);
        let mut input = frame(false, OPCODE_TEXT, &SMALL[..10]);
        input.extend(&ping);
        input.extend(frame(true, OPCODE_CONTINUATION, &SMALL[10..]));
        input.extend(&close);
        let mut expected = ping.clone();
        expected.extend(binary(SMALL));
        expected.extend(&close);
        check(64, &input, &expected);
    }

    #[test]
    fn a_fragmented_message_is_handed_on_whole_or_as_a_marker_when_it_grows_over_the_limit() {
        let long = big(9, 150);
        let mut input = frame(false, OPCODE_TEXT, &long[..60]);
        input.extend(frame(false, OPCODE_CONTINUATION, &long[60..120]));
        input.extend(frame(true, OPCODE_CONTINUATION, &long[120..]));
        check(150, &input, &binary(&long));
        check(100, &input, &marker(150, Some(9)));
    }

    #[test]
    fn protocol_errors_are_left_for_tungstenite() {
        // A continuation with no message started, and a masked frame: unchanged.
        let stray = frame(true, OPCODE_CONTINUATION, b"x");
        check(64, &stray, &stray);
        let mut masked = vec![FIN | OPCODE_TEXT, 0x80 | 2, 1, 2, 3, 4];
        masked.extend(b"ab");
        check(64, &masked, &masked);
    }

    #[test]
    fn finds_the_top_level_id_in_the_first_bytes() {
        let check_id = |text: &str, expected: Option<u64>| {
            assert_eq!(top_level_id(text.as_bytes()), expected, "{text}");
        };
        check_id(r#"{"jsonrpc":"2.0","id":12,"result":[1,2"#, Some(12));
        check_id(r#"{ "id" : 5 , "#, Some(5));
        check_id(r#"{"result":{"id":3},"id":4,"x"#, Some(4));
        check_id(r#"{"result":"a \"id\": 3","id":6}"#, Some(6));
        check_id(r#"{"result":"id","id":8,"#, Some(8));
        check_id(r#"{"jsonrpc":"2.0","result":[{"id":1}"#, None);
        check_id(r#"{"jsonrpc":"2.0","id":12"#, None); // may go on: 123...
        check_id(r#"{"jsonrpc":"2.0","id":"a""#, None);
        check_id("\u{0}garbage", None);
    }
}
