//! What the builder sums or reads once for the whole run: the device time
//! and traffic totals, and where the constructs ran.

use accprof_trace::Header;

use super::entities::*;

/// The device time and host<->device traffic of a run, summed once by the
/// builder: every view reads these, none adds them up again.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Totals {
    /// Device time of the kernels CUPTI timed (start to end of each).
    pub kernel_ns: u64,
    /// Kernels the run holds (launch events too when CUPTI did not record).
    pub kernels: u64,
    /// Host<->device transfers (uploads and downloads; device-to-device and
    /// other copies are not counted): their time, number and bytes.
    pub transfer_ns: u64,
    pub transfers: u64,
    pub transfer_bytes: u64,
    /// Top-level constructs (nested ones count with their parent) and
    /// their host time, start to end of each.
    pub constructs: u64,
    pub host_construct_ns: u64,
    /// Constructs whose end event never came ([`Construct::cut`]).
    pub cut_constructs: u64,
}

impl Totals {
    pub(crate) fn add_construct(&mut self, c: &Construct) {
        if c.cut {
            self.cut_constructs += 1;
        }
        if c.parent.is_none() {
            self.constructs += 1;
            self.host_construct_ns = self
                .host_construct_ns
                .saturating_add(c.host_ns().unwrap_or(0));
        }
    }

    pub(crate) fn add_kernel(&mut self, k: &Kernel) {
        if k.device_timed() {
            self.kernel_ns = self.kernel_ns.saturating_add(k.device_ns());
        }
        self.kernels += 1;
    }

    pub(crate) fn add_transfer(&mut self, x: &Transfer) {
        if x.is_host_device() {
            self.transfer_ns = self.transfer_ns.saturating_add(x.duration_ns());
            self.transfers += 1;
            self.transfer_bytes = self.transfer_bytes.saturating_add(x.bytes);
        }
    }
}

/// `acc_device_host` in the OpenACC API's numbering of `acc_device_t`.
pub const ACC_DEVICE_HOST: u32 = 2;

/// Where the constructs ran and which runtime ran them.
#[derive(Debug, Clone, Copy, Default)]
pub struct Placement {
    /// Some construct ran on the host (OpenACC host fallback).
    pub(super) some_on_host: bool,
    /// There were constructs and every one ran on the host.
    pub(super) all_on_host: bool,
    /// The OpenACC runtime is GCC's libgomp.
    pub(super) libgomp: bool,
    /// Constructs were seen.
    pub(super) any: bool,
}

impl Placement {
    pub(crate) fn new(header: &Header) -> Placement {
        Placement {
            libgomp: header.runtime.contains("libgomp"),
            ..Placement::default()
        }
    }

    pub(crate) fn add(&mut self, c: &Construct) {
        let on_host = c.device_type() == Some(ACC_DEVICE_HOST);
        self.some_on_host |= on_host;
        self.all_on_host = on_host && (self.all_on_host || !self.any);
        self.any = true;
    }

    /// Some construct ran on the host.
    pub(crate) fn some_on_host(&self) -> bool {
        self.some_on_host
    }

    /// The OpenACC runtime is GCC's libgomp.
    pub(crate) fn libgomp(&self) -> bool {
        self.libgomp
    }
}
