//! Reading a capture file: tcpdump's pcap (micro- or nanosecond) and pcapng, streamed in
//! bounded memory through pcap-parser, each packet's link layer taken off (Ethernet with
//! VLANs, Linux cooked SLL and SLL2, BSD loopback/null, raw IP) and its IPv4/IPv6 and TCP
//! headers read with etherparse. What comes out is a TCP [`Segment`] with the capture's
//! own timestamp; anything else is counted and skipped. Every error names the file, what
//! was being read and what to do; nothing in a file can panic here.

use std::fs::File;
use std::net::{IpAddr, SocketAddr};
use std::path::Path;

use anyhow::{bail, Context, Result};
use etherparse::{EtherType, NetSlice, SlicedPacket, TransportSlice};
use pcap_parser::pcapng::Block;
use pcap_parser::{create_reader, Linktype, PcapBlockOwned, PcapError};

/// The reader's buffer: grown for a packet larger than it (pcapng blocks up to the cap).
const BUFFER: usize = 1 << 20;
/// The largest block read: tcpdump's snap length is 262,144 bytes.
const MAX_BLOCK: usize = 16 << 20;

/// One TCP segment as captured.
#[derive(Debug, Clone)]
pub struct Segment<'a> {
    /// The capture's timestamp, nanoseconds since the Unix epoch.
    pub ts_ns: u64,
    pub src: SocketAddr,
    pub dst: SocketAddr,
    pub seq: u32,
    pub ack: Option<u32>,
    pub syn: bool,
    pub fin: bool,
    pub rst: bool,
    pub payload: &'a [u8],
}

/// What a file held besides its TCP segments.
#[derive(Debug, Default, Clone)]
pub struct FileInfo {
    pub packets: u64,
    /// Packets that were not TCP over IP (ARP, UDP, fragments, ...).
    pub not_tcp: u64,
    /// Packets cut short by the capture's snap length.
    pub cut: u64,
    /// The link type of the first interface, by name.
    pub link: String,
    /// pcapng's `if_name`, when the file says.
    pub interface: Option<String>,
    pub first_ns: Option<u64>,
    pub last_ns: u64,
}

/// A pcapng interface: how to read its packets' link layer and timestamps.
struct Interface {
    link: Link,
    /// Timestamp units per second, and seconds to add.
    resolution: u64,
    offset_s: i64,
}

/// The link layers read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Link {
    Ethernet,
    LinuxSll,
    LinuxSll2,
    /// BSD loopback: a 4-byte address family, in the capturing host's order (DLT_NULL)
    /// or network order (DLT_LOOP).
    Null,
    Raw,
}

impl Link {
    fn of(t: Linktype, file: &Path) -> Result<Link> {
        Ok(match t.0 {
            1 => Link::Ethernet,
            113 => Link::LinuxSll,
            276 => Link::LinuxSll2,
            0 | 108 => Link::Null,
            12 | 14 | 101 | 228 | 229 => Link::Raw,
            other => bail!(
                "--from-pcap {}: reading the capture's interfaces: link type {other} is not read \
                 (Ethernet, Linux cooked SLL/SLL2, loopback/null and raw IP are); capture on \
                 the database host's interface or `tcpdump -i any`",
                file.display()
            ),
        })
    }

    fn name(self) -> &'static str {
        match self {
            Link::Ethernet => "ethernet",
            Link::LinuxSll => "linux_sll",
            Link::LinuxSll2 => "linux_sll2",
            Link::Null => "null",
            Link::Raw => "raw",
        }
    }
}

/// Reads `path` from its start, calling `each` with every TCP segment in file order.
pub fn segments(path: &Path, mut each: impl FnMut(&Segment<'_>) -> Result<()>) -> Result<FileInfo> {
    let shown = path.display();
    let file = File::open(path).with_context(|| format!("--from-pcap {shown}: cannot open the capture"))?;
    let mut reader = create_reader(BUFFER, file).map_err(|e| {
        anyhow::anyhow!(
            "--from-pcap {shown}: reading the file's header: {} (write one with `tcpdump -w FILE`)",
            match e {
                PcapError::Eof => "the file is empty".to_string(),
                PcapError::HeaderNotRecognized => "not a pcap or pcapng capture".to_string(),
                e => format!("not a pcap or pcapng capture ({e})"),
            }
        )
    })?;
    let mut info = FileInfo::default();
    let mut framing = Framing::default();
    // Reads that gave no block since the last: a parser that keeps asking for more of a
    // file that has no more must not spin.
    let mut stalls = 0u32;
    loop {
        stalls += 1;
        if stalls > 1000 {
            bail!(
                "--from-pcap {shown}: reading packet {}: the reader makes no progress; the file \
                 is damaged",
                info.packets + 1
            );
        }
        let (used, block) = match reader.next() {
            Ok(b) => b,
            Err(PcapError::Eof) => break,
            Err(PcapError::Incomplete(_)) => {
                reader.refill().map_err(|e| {
                    anyhow::anyhow!("--from-pcap {shown}: reading packet {}: {e}", info.packets + 1)
                })?;
                continue;
            }
            Err(PcapError::BufferTooSmall) => {
                let size = reader.data().len().max(BUFFER) * 2;
                if size > MAX_BLOCK || !reader.grow(size) {
                    bail!(
                        "--from-pcap {shown}: reading packet {}: a block over {} MiB; the file \
                         is damaged or not a capture",
                        info.packets + 1,
                        MAX_BLOCK >> 20
                    );
                }
                reader.refill().map_err(|e| {
                    anyhow::anyhow!("--from-pcap {shown}: reading packet {}: {e}", info.packets + 1)
                })?;
                continue;
            }
            Err(PcapError::UnexpectedEof) => {
                // A capture cut short (tcpdump killed, a copy still being written): what
                // came before is kept, and said.
                eprintln!(
                    "record: --from-pcap {shown}: the file ends inside packet {} (cut short): \
                     reading what came before it",
                    info.packets + 1
                );
                break;
            }
            Err(e) => bail!(
                "--from-pcap {shown}: reading packet {}: {e}; the file is damaged (a capture \
                 still being written? stop tcpdump first)",
                info.packets + 1
            ),
        };
        stalls = 0;
        let packet = framing.packet(block, info.packets, path, &mut info)?;
        if let Some((link, ts_ns, data, cut)) = packet {
            info.packets += 1;
            info.first_ns.get_or_insert(ts_ns);
            info.last_ns = info.last_ns.max(ts_ns);
            info.cut += cut as u64;
            // A packet cut short is not read at all: its bytes are missing, as a dropped
            // packet's are, and the stream says so where they were needed.
            match tcp(link, ts_ns, data) {
                Some(s) => each(&s)?,
                None if !cut => info.not_tcp += 1,
                None => {}
            }
        }
        reader.consume(used);
    }
    Ok(info)
}

/// What a file said of its packets so far: the legacy header's link type and
/// timestamp unit, or pcapng's interfaces.
#[derive(Default)]
struct Framing {
    legacy: Option<(Link, u64)>,
    interfaces: Vec<Interface>,
}

/// A packet: its link type, capture time (ns since the epoch), bytes, and whether the
/// capture cut it short.
type Packet<'a> = (Link, u64, &'a [u8], bool);

impl Framing {
    /// The packet in `block` (the file's `packets + 1`th), if it holds one; the
    /// headers and interface descriptions learnt (the first one's link type and
    /// name into `info`).
    fn packet<'a>(
        &mut self,
        block: PcapBlockOwned<'a>,
        packets: u64,
        path: &Path,
        info: &mut FileInfo,
    ) -> Result<Option<Packet<'a>>> {
        Ok(match block {
            PcapBlockOwned::LegacyHeader(h) => {
                let link = Link::of(h.network, path)?;
                info.link = link.name().to_string();
                let per_s = if h.is_nanosecond_precision() {
                    1_000_000_000
                } else {
                    1_000_000
                };
                self.legacy = Some((link, per_s));
                None
            }
            PcapBlockOwned::Legacy(b) => {
                let (link, per_s) = self.legacy.unwrap_or((Link::Ethernet, 1_000_000));
                let ts = b.ts_sec as u64 * 1_000_000_000 + b.ts_usec as u64 * (1_000_000_000 / per_s);
                Some((link, ts, b.data, b.caplen < b.origlen))
            }
            PcapBlockOwned::NG(Block::SectionHeader(_)) => {
                self.interfaces.clear();
                None
            }
            PcapBlockOwned::NG(Block::InterfaceDescription(i)) => {
                let link = Link::of(i.linktype, path)?;
                if self.interfaces.is_empty() {
                    info.link = link.name().to_string();
                    info.interface = i.if_name().and_then(|n| n.ok()).map(str::to_string);
                }
                self.interfaces.push(Interface {
                    link,
                    resolution: i.ts_resolution().unwrap_or(1_000_000).max(1),
                    offset_s: i.ts_offset(),
                });
                None
            }
            PcapBlockOwned::NG(Block::EnhancedPacket(p)) => {
                let Some(i) = self.interfaces.get(p.if_id as usize) else {
                    bail!(
                        "--from-pcap {}: reading packet {}: interface {} was never described; \
                         the file is damaged",
                        path.display(),
                        packets + 1,
                        p.if_id
                    );
                };
                let ticks = ((p.ts_high as u64) << 32) | p.ts_low as u64;
                let ns = (ticks as u128 * 1_000_000_000 / i.resolution as u128) as i128
                    + i.offset_s as i128 * 1_000_000_000;
                Some((
                    i.link,
                    ns.clamp(0, u64::MAX as i128) as u64,
                    p.data,
                    p.caplen < p.origlen,
                ))
            }
            // Simple packets carry no timestamp, and the rest no packet.
            PcapBlockOwned::NG(_) => None,
        })
    }
}

/// The TCP segment in a packet, if it is one (a fragment or a packet cut inside its
/// headers is not).
fn tcp(link: Link, ts_ns: u64, data: &[u8]) -> Option<Segment<'_>> {
    let sliced = match link {
        Link::Ethernet => SlicedPacket::from_ethernet(data),
        Link::LinuxSll => SlicedPacket::from_linux_sll(data),
        Link::LinuxSll2 => {
            // SLL2: protocol (2), reserved (2), interface (4), ARPHRD (2), packet type (1),
            // address length (1), address (8).
            let proto = u16::from_be_bytes([*data.first()?, *data.get(1)?]);
            SlicedPacket::from_ether_type(EtherType(proto), data.get(20..)?)
        }
        Link::Null => {
            let family = data.get(..4)?;
            // AF_INET is 2 everywhere; AF_INET6 is 10, 24, 28 or 30 by system; either order.
            let v4 = family == [2, 0, 0, 0] || family == [0, 0, 0, 2];
            let rest = data.get(4..)?;
            match rest.first().map(|b| b >> 4) {
                Some(4) | Some(6) if v4 || family.iter().any(|b| [10, 24, 28, 30].contains(b)) => {
                    SlicedPacket::from_ip(rest)
                }
                _ => return None,
            }
        }
        Link::Raw => SlicedPacket::from_ip(data),
    }
    .ok()?;
    let (src_ip, dst_ip): (IpAddr, IpAddr) = match sliced.net? {
        NetSlice::Ipv4(ip) => (
            ip.header().source_addr().into(),
            ip.header().destination_addr().into(),
        ),
        NetSlice::Ipv6(ip) => (
            ip.header().source_addr().into(),
            ip.header().destination_addr().into(),
        ),
        NetSlice::Arp(_) => return None,
    };
    let TransportSlice::Tcp(t) = sliced.transport? else {
        return None;
    };
    Some(Segment {
        ts_ns,
        src: SocketAddr::new(src_ip, t.source_port()),
        dst: SocketAddr::new(dst_ip, t.destination_port()),
        seq: t.sequence_number(),
        ack: t.ack().then(|| t.acknowledgment_number()),
        syn: t.syn(),
        fin: t.fin(),
        rst: t.rst(),
        payload: t.payload(),
    })
}
