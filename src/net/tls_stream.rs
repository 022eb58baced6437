//! A TLS connection as hyper reads and writes it: the socket and its
//! record layer (`crate::tls13::Records`) behind tokio's `AsyncRead` and
//! `AsyncWrite`, in place of tokio-rustls's stream.

use std::io::{self, ErrorKind, IoSlice};
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use bytes::Bytes;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

use crate::live::{Stream, Upgraded};
use crate::tls13::Records;

pub struct TlsStream {
    tcp: TcpStream,
    records: Box<Records>,
}

impl TlsStream {
    pub fn new(tcp: TcpStream, records: Box<Records>) -> TlsStream {
        TlsStream { tcp, records }
    }

    /// The socket and the records, as the parked fast path drives them.
    pub fn parts(&mut self) -> (&TcpStream, &mut Records) {
        (&self.tcp, &mut self.records)
    }

    pub fn socket(&self) -> &TcpStream {
        &self.tcp
    }

    /// The connection for a live WebSocket after its 101: `leftover` (what
    /// hyper read past the request) and then the plaintext the records
    /// hold go first; `None` if a held record fails to open.
    pub fn into_upgraded(mut self, leftover: Bytes) -> Option<Upgraded> {
        if !self.records.buffered() {
            return Some((Stream::Tls(self.tcp, self.records), leftover));
        }
        let mut first = leftover.to_vec();
        self.records.take_buffered(&mut first).ok()?;
        Some((Stream::Tls(self.tcp, self.records), Bytes::from(first)))
    }

    /// Runs `op` on the records, waiting for the socket to be readable (or
    /// `writing`, writable) while it would block.
    fn poll_io<R>(
        &mut self,
        cx: &mut Context<'_>,
        writing: bool,
        mut op: impl FnMut(&mut Records, &TcpStream) -> io::Result<R>,
    ) -> Poll<io::Result<R>> {
        loop {
            match op(&mut self.records, &self.tcp) {
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    // `try_read` and `try_write` cleared tokio's readiness,
                    // so this registers for the next edge.
                    let ready = if writing { self.tcp.poll_write_ready(cx) } else { self.tcp.poll_read_ready(cx) };
                    ready!(ready)?;
                }
                other => return Poll::Ready(other),
            }
        }
    }
}

impl AsyncRead for TlsStream {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        if buf.remaining() == 0 {
            return Poll::Ready(Ok(()));
        }
        let dst = buf.initialize_unfilled();
        let read = ready!(
            self.get_mut()
                .poll_io(cx, false, |records, tcp| { records.read(dst, &mut |b: &mut [u8]| tcp.try_read(b)) })
        );
        match read {
            Ok(n) => buf.advance(n),
            // The client's close_notify: the end of the stream.
            Err(e) if e.kind() == ErrorKind::UnexpectedEof => {}
            Err(e) => return Poll::Ready(Err(e)),
        }
        Poll::Ready(Ok(()))
    }
}

impl AsyncWrite for TlsStream {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        self.poll_write_vectored(cx, &[IoSlice::new(buf)])
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.get_mut().poll_io(cx, true, |records, tcp| records.write(bufs, &mut |b: &[u8]| tcp.try_write(b)))
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.get_mut().poll_io(cx, true, |records, tcp| match records.flush(&mut |b: &[u8]| tcp.try_write(b))? {
            true => Ok(()),
            false => Err(ErrorKind::WouldBlock.into()),
        })
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        ready!(Pin::new(&mut *this).poll_flush(cx))?;
        this.records.close_notify(&mut |b: &[u8]| this.tcp.try_write(b));
        Pin::new(&mut this.tcp).poll_shutdown(cx)
    }
}
