//! The diagnostics IPC messages the trigger uses, as pure functions over bytes.
//!
//! Facts from the protocol (dotnet/diagnostics `ipc-protocol.md`): every
//! message starts with a 20-byte header — 14 bytes of magic
//! `DOTNET_IPC_V1\0`, a little-endian `u16` total size (header included), a
//! command set byte, a command id byte and a reserved `u16` (0). Replies use
//! command set `0xFF` (server) with id `0x00` (OK) or `0xFF` (error); an
//! error reply, and the OK reply of the profiler commands, carry an `i32`
//! `HRESULT` as payload. Strings are a `u32` count of UTF-16 code units
//! including the terminating NUL, then the code units.

use windows_core::GUID;

/// The header's magic.
pub const MAGIC: &[u8; 14] = b"DOTNET_IPC_V1\0";
/// Size of the header.
pub const HEADER_LEN: usize = 20;
/// Command set of server replies.
pub const SERVER: u8 = 0xFF;
/// Server reply id: OK.
pub const SERVER_OK: u8 = 0x00;
/// Server reply id: error.
pub const SERVER_ERROR: u8 = 0xFF;
/// Command set of the profiler commands.
pub const PROFILER: u8 = 0x03;
/// `AttachProfiler` (profiler command set, .NET Core 3.0+).
pub const ATTACH_PROFILER: u8 = 0x01;
/// `StartupProfiler` (profiler command set; meaningful only while the
/// runtime is suspended at startup by a diagnostic port. Seen here: .NET
/// 8.0.4 also answers OK later, to no effect; .NET Core 3.1.23 treats every
/// profiler command as `AttachProfiler` and answers
/// `CORDIAGIPC_E_BAD_ENCODING`).
pub const STARTUP_PROFILER: u8 = 0x02;
/// Command set of the process commands (.NET 5+).
pub const PROCESS: u8 = 0x04;
/// `ResumeRuntime` (process command set).
pub const RESUME_RUNTIME: u8 = 0x01;

/// The advertise message a runtime sends when it connects to a diagnostic
/// port: 8 bytes magic `ADVR_V1\0`, 16 bytes runtime cookie, `u64` process
/// id, `u16` reserved.
pub const ADVERTISE_MAGIC: &[u8; 8] = b"ADVR_V1\0";
/// Size of the advertise message.
pub const ADVERTISE_LEN: usize = 34;

/// Builds a message: header plus `payload`. `None` when the message would
/// not fit the header's 16-bit size.
pub fn message(command_set: u8, command_id: u8, payload: &[u8]) -> Option<Vec<u8>> {
    let size = u16::try_from(HEADER_LEN + payload.len()).ok()?;
    let mut m = Vec::with_capacity(size as usize);
    m.extend_from_slice(MAGIC);
    m.extend_from_slice(&size.to_le_bytes());
    m.push(command_set);
    m.push(command_id);
    m.extend_from_slice(&0u16.to_le_bytes());
    m.extend_from_slice(payload);
    Some(m)
}

/// A GUID in the protocol's byte order (that of .NET's `Guid.ToByteArray`):
/// `Data1`, `Data2`, `Data3` little-endian, then the 8 bytes of `Data4`.
pub fn guid_bytes(g: &GUID) -> [u8; 16] {
    let mut b = [0u8; 16];
    b[..4].copy_from_slice(&g.data1.to_le_bytes());
    b[4..6].copy_from_slice(&g.data2.to_le_bytes());
    b[6..8].copy_from_slice(&g.data3.to_le_bytes());
    b[8..].copy_from_slice(&g.data4);
    b
}

/// Appends a protocol string: `u32` count of UTF-16 units including the
/// NUL, then the units, little-endian.
fn push_string(out: &mut Vec<u8>, s: &str) {
    let units: Vec<u16> = s.encode_utf16().chain(Some(0)).collect();
    out.extend_from_slice(&(units.len() as u32).to_le_bytes());
    for u in units {
        out.extend_from_slice(&u.to_le_bytes());
    }
}

/// The `AttachProfiler` payload: timeout (ms), CLSID, profiler path, client data.
pub fn attach_profiler_payload(
    timeout_ms: u32,
    clsid: &GUID,
    path: &str,
    client_data: &[u8],
) -> Vec<u8> {
    let mut p = Vec::with_capacity(32 + path.len() * 2 + client_data.len());
    p.extend_from_slice(&timeout_ms.to_le_bytes());
    p.extend_from_slice(&guid_bytes(clsid));
    push_string(&mut p, path);
    p.extend_from_slice(&(client_data.len() as u32).to_le_bytes());
    p.extend_from_slice(client_data);
    p
}

/// The `StartupProfiler` payload: CLSID and profiler path.
pub fn startup_profiler_payload(clsid: &GUID, path: &str) -> Vec<u8> {
    let mut p = Vec::with_capacity(20 + path.len() * 2);
    p.extend_from_slice(&guid_bytes(clsid));
    push_string(&mut p, path);
    p
}

/// A complete server reply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reply {
    /// `OK`, with the `HRESULT` of the payload when there is one (the
    /// profiler commands send one; `ResumeRuntime` sends none).
    Ok {
        /// The payload's leading `i32`, if the payload has four bytes or more.
        hresult: Option<i32>,
    },
    /// `Error`, with the server's `HRESULT`.
    Error {
        /// The error code.
        hresult: i32,
    },
}

/// What [`parse_reply`] made of the bytes received so far.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Parsed {
    /// Not enough bytes yet: the reply needs at least this many in total.
    NeedMore(usize),
    /// A whole reply, which took `len` bytes.
    Reply {
        /// The reply.
        reply: Reply,
        /// Bytes it occupied.
        len: usize,
    },
    /// The bytes are not a reply of this protocol; reading more will not help.
    Invalid(String),
}

/// Parses a server reply from the bytes received so far.
///
/// Never panics, whatever the input: a short read yields [`Parsed::NeedMore`]
/// with the total to wait for; a wrong magic, a size below the header, a
/// command set other than the server's or an error reply without its
/// `HRESULT` yield [`Parsed::Invalid`]. A payload longer than the `HRESULT`
/// (an oversized reply) is accepted and the excess ignored; the 16-bit size
/// field bounds what is ever waited for to 65535 bytes.
pub fn parse_reply(bytes: &[u8]) -> Parsed {
    let magic_seen = bytes.len().min(MAGIC.len());
    if bytes[..magic_seen] != MAGIC[..magic_seen] {
        return Parsed::Invalid(format!(
            "reply does not start with the DOTNET_IPC_V1 magic (got {:02x?})",
            &bytes[..magic_seen]
        ));
    }
    if bytes.len() < HEADER_LEN {
        return Parsed::NeedMore(HEADER_LEN);
    }
    let size = u16::from_le_bytes([bytes[14], bytes[15]]) as usize;
    if size < HEADER_LEN {
        return Parsed::Invalid(format!(
            "reply header claims {size} bytes, less than the header itself"
        ));
    }
    if bytes.len() < size {
        return Parsed::NeedMore(size);
    }
    let (set, id) = (bytes[16], bytes[17]);
    let payload = &bytes[HEADER_LEN..size];
    let leading_i32 = payload
        .get(..4)
        .map(|b| i32::from_le_bytes([b[0], b[1], b[2], b[3]]));
    let reply = match (set, id) {
        (SERVER, SERVER_OK) => Reply::Ok {
            hresult: leading_i32,
        },
        (SERVER, SERVER_ERROR) => match leading_i32 {
            Some(hresult) => Reply::Error { hresult },
            None => {
                return Parsed::Invalid(format!(
                    "error reply with a {}-byte payload, too short for its HRESULT",
                    payload.len()
                ))
            }
        },
        _ => {
            return Parsed::Invalid(format!(
                "reply has command {set:#04x}/{id:#04x}, not a server OK or error"
            ))
        }
    };
    Parsed::Reply { reply, len: size }
}

/// A parsed advertise message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Advertise {
    /// The runtime instance cookie.
    pub cookie: [u8; 16],
    /// The process id of the runtime that connected.
    pub pid: u64,
}

/// Parses the 34-byte advertise message; `None` when the magic is wrong or
/// the slice is too short.
pub fn parse_advertise(bytes: &[u8]) -> Option<Advertise> {
    let b = bytes.get(..ADVERTISE_LEN)?;
    if &b[..8] != ADVERTISE_MAGIC {
        return None;
    }
    let mut cookie = [0u8; 16];
    cookie.copy_from_slice(&b[8..24]);
    let mut pid = [0u8; 8];
    pid.copy_from_slice(&b[24..32]);
    Some(Advertise {
        cookie,
        pid: u64::from_le_bytes(pid),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn reply_bytes(set: u8, id: u8, payload: &[u8]) -> Vec<u8> {
        message(set, id, payload).unwrap()
    }

    #[test]
    fn attach_message_layout() {
        let clsid = GUID::from_u128(0x8C3D4D6A_2E7B_4F0E_9B61_3A1B2C4D5E6F);
        let payload = attach_profiler_payload(5000, &clsid, "/p.so", b"k=v");
        let m = message(PROFILER, ATTACH_PROFILER, &payload).unwrap();
        assert_eq!(&m[..14], MAGIC);
        assert_eq!(u16::from_le_bytes([m[14], m[15]]) as usize, m.len());
        assert_eq!((m[16], m[17], m[18], m[19]), (0x03, 0x01, 0, 0));
        assert_eq!(&m[20..24], &5000u32.to_le_bytes());
        // Guid.ToByteArray order of 8C3D4D6A-2E7B-4F0E-9B61-3A1B2C4D5E6F.
        assert_eq!(
            &m[24..40],
            &[
                0x6A, 0x4D, 0x3D, 0x8C, 0x7B, 0x2E, 0x0E, 0x4F, 0x9B, 0x61, 0x3A, 0x1B, 0x2C, 0x4D,
                0x5E, 0x6F
            ]
        );
        assert_eq!(&m[40..44], &6u32.to_le_bytes()); // "/p.so" + NUL
        assert_eq!(&m[44..56], b"/\0p\0.\0s\0o\0\0\0");
        assert_eq!(&m[56..60], &3u32.to_le_bytes());
        assert_eq!(&m[60..], b"k=v");
        assert!(message(PROFILER, ATTACH_PROFILER, &vec![0; 70_000]).is_none());
    }

    #[test]
    fn replies_of_the_runtime() {
        let ok = reply_bytes(SERVER, SERVER_OK, &0i32.to_le_bytes());
        assert_eq!(
            parse_reply(&ok),
            Parsed::Reply {
                reply: Reply::Ok { hresult: Some(0) },
                len: 24
            }
        );
        let already = reply_bytes(SERVER, SERVER_ERROR, &(0x8013136Au32 as i32).to_le_bytes());
        assert_eq!(
            parse_reply(&already),
            Parsed::Reply {
                reply: Reply::Error {
                    hresult: 0x8013136Au32 as i32
                },
                len: 24
            }
        );
        let resumed = reply_bytes(SERVER, SERVER_OK, &[]);
        assert_eq!(
            parse_reply(&resumed),
            Parsed::Reply {
                reply: Reply::Ok { hresult: None },
                len: 20
            }
        );
    }

    #[test]
    fn short_reads_ask_for_more() {
        let ok = reply_bytes(SERVER, SERVER_OK, &0i32.to_le_bytes());
        assert_eq!(parse_reply(&[]), Parsed::NeedMore(HEADER_LEN));
        assert_eq!(parse_reply(&ok[..7]), Parsed::NeedMore(HEADER_LEN));
        assert_eq!(parse_reply(&ok[..20]), Parsed::NeedMore(24));
        assert_eq!(parse_reply(&ok[..23]), Parsed::NeedMore(24));
    }

    #[test]
    fn garbage_and_odd_replies_are_invalid_or_tolerated() {
        assert!(matches!(
            parse_reply(b"HTTP/1.1 200 OK\r\n\r\n"),
            Parsed::Invalid(_)
        ));
        let mut tiny = reply_bytes(SERVER, SERVER_OK, &[]);
        tiny[14] = 3;
        assert!(matches!(parse_reply(&tiny), Parsed::Invalid(_)));
        let not_server = reply_bytes(PROFILER, ATTACH_PROFILER, &[0; 4]);
        assert!(matches!(parse_reply(&not_server), Parsed::Invalid(_)));
        let error_without_code = reply_bytes(SERVER, SERVER_ERROR, &[1, 2]);
        assert!(matches!(
            parse_reply(&error_without_code),
            Parsed::Invalid(_)
        ));
        // Oversized: the excess after the HRESULT is ignored.
        let mut big = vec![0u8; 4 + 1000];
        big[..4].copy_from_slice(&7i32.to_le_bytes());
        let big = reply_bytes(SERVER, SERVER_OK, &big);
        assert_eq!(
            parse_reply(&big),
            Parsed::Reply {
                reply: Reply::Ok { hresult: Some(7) },
                len: 1024
            }
        );
    }

    #[test]
    fn advertise() {
        let mut a = Vec::from(&ADVERTISE_MAGIC[..]);
        a.extend_from_slice(&[9; 16]);
        a.extend_from_slice(&4242u64.to_le_bytes());
        a.extend_from_slice(&[0, 0]);
        assert_eq!(
            parse_advertise(&a),
            Some(Advertise {
                cookie: [9; 16],
                pid: 4242
            })
        );
        assert_eq!(parse_advertise(&a[..33]), None);
        a[0] = b'X';
        assert_eq!(parse_advertise(&a), None);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            match parse_reply(&bytes) {
                Parsed::NeedMore(n) => prop_assert!(n > bytes.len() && n <= u16::MAX as usize),
                Parsed::Reply { len, .. } => prop_assert!(len >= HEADER_LEN && len <= bytes.len()),
                Parsed::Invalid(_) => {}
            }
            let _ = parse_advertise(&bytes);
        }

        #[test]
        fn bytes_after_a_valid_header_never_panic(
            set in any::<u8>(), id in any::<u8>(), size in any::<u16>(),
            rest in proptest::collection::vec(any::<u8>(), 0..100),
        ) {
            let mut b = Vec::from(&MAGIC[..]);
            b.extend_from_slice(&size.to_le_bytes());
            b.extend_from_slice(&[set, id, 0, 0]);
            b.extend_from_slice(&rest);
            let _ = parse_reply(&b);
        }

        #[test]
        fn valid_replies_round_trip(
            error in any::<bool>(), hr in any::<i32>(),
            extra in proptest::collection::vec(any::<u8>(), 0..64),
            split in any::<prop::sample::Index>(),
        ) {
            let mut payload = hr.to_le_bytes().to_vec();
            payload.extend_from_slice(&extra);
            let id = if error { SERVER_ERROR } else { SERVER_OK };
            let mut bytes = reply_bytes(SERVER, id, &payload);
            let len = bytes.len();
            // Any prefix asks for more; the whole reply (plus trailing bytes) parses.
            let cut = split.index(len);
            prop_assert!(matches!(parse_reply(&bytes[..cut]), Parsed::NeedMore(n) if n > cut));
            bytes.extend_from_slice(&[0xAB; 5]);
            let want = if error { Reply::Error { hresult: hr } } else { Reply::Ok { hresult: Some(hr) } };
            prop_assert_eq!(parse_reply(&bytes), Parsed::Reply { reply: want, len });
        }
    }
}
