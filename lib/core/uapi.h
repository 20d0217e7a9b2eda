/* SPDX-License-Identifier: LGPL-2.1-or-later OR MIT */
/*
 * Kernel UAPI the build machine's headers may lack (devmem arrived in 6.12,
 * later than many distributions' linux-libc-dev).  Each item is defined on
 * its own, and only where the system header does not already provide it,
 * with the per-architecture values of include/uapi/asm-* where they differ.
 * Never installed.
 */
#ifndef DEVMEMTCP_UAPI_H
#define DEVMEMTCP_UAPI_H

#include <stdint.h>
#include <sys/socket.h>
#include <linux/ioctl.h>
#include <linux/types.h>

/* ---- socket options and cmsg types (asm-generic/socket.h + arches) ---- */
#if defined(__sparc__)
#define DMT_SO_DEVMEM_LINEAR 0x0057
#define DMT_SO_DEVMEM_DMABUF 0x0058
#define DMT_SO_DEVMEM_DONTNEED 0x0059
#elif defined(__hppa__)
#define DMT_SO_DEVMEM_LINEAR 0x404E
#define DMT_SO_DEVMEM_DMABUF 0x404F
#define DMT_SO_DEVMEM_DONTNEED 0x4050
#else /* generic, x86, arm, alpha, mips, powerpc, s390, riscv, loongarch */
#define DMT_SO_DEVMEM_LINEAR 78
#define DMT_SO_DEVMEM_DMABUF 79
#define DMT_SO_DEVMEM_DONTNEED 80
#endif

#ifndef SO_DEVMEM_LINEAR
#define SO_DEVMEM_LINEAR DMT_SO_DEVMEM_LINEAR
#endif
#ifndef SCM_DEVMEM_LINEAR
#define SCM_DEVMEM_LINEAR SO_DEVMEM_LINEAR
#endif
#ifndef SO_DEVMEM_DMABUF
#define SO_DEVMEM_DMABUF DMT_SO_DEVMEM_DMABUF
#endif
#ifndef SCM_DEVMEM_DMABUF
#define SCM_DEVMEM_DMABUF SO_DEVMEM_DMABUF
#endif
#ifndef SO_DEVMEM_DONTNEED
#define SO_DEVMEM_DONTNEED DMT_SO_DEVMEM_DONTNEED
#endif

#ifndef SO_ZEROCOPY
#if defined(__sparc__)
#define SO_ZEROCOPY 0x003e
#elif defined(__hppa__)
#define SO_ZEROCOPY 0x4035
#else
#define SO_ZEROCOPY 60
#endif
#endif

/* include/linux/socket.h (kernel-internal flag values, stable ABI) */
#ifndef MSG_SOCK_DEVMEM
#define MSG_SOCK_DEVMEM 0x2000000
#endif
#ifndef MSG_ZEROCOPY
#define MSG_ZEROCOPY 0x4000000
#endif

/* include/linux/errno.h: kernel-internal, reaches user space from recvmsg */
#ifndef ETOOSMALL
#define ETOOSMALL 525
#endif

/* ---- include/uapi/linux/uio.h ---- */
struct dmt_dmabuf_cmsg {
	__u64 frag_offset;
	__u32 frag_size;
	__u32 frag_token;
	__u32 dmabuf_id;
	__u32 flags;
};

struct dmt_dmabuf_token {
	__u32 token_start;
	__u32 token_count;
};

/* Kernel limits of SO_DEVMEM_DONTNEED (net/core/sock.c). */
#define DMT_MAX_DONTNEED_TOKENS 128
#define DMT_MAX_DONTNEED_FRAGS 1024

/* ---- include/uapi/linux/netdev.h (genl family "netdev") ---- */
#define DMT_NETDEV_FAMILY_NAME "netdev"
#define DMT_NETDEV_FAMILY_VERSION 1

enum {
	DMT_NETDEV_CMD_DEV_GET = 1,
	DMT_NETDEV_CMD_PAGE_POOL_GET = 5,
	DMT_NETDEV_CMD_QUEUE_GET = 10,
	DMT_NETDEV_CMD_NAPI_GET = 11,
	DMT_NETDEV_CMD_QSTATS_GET = 12,
	DMT_NETDEV_CMD_BIND_RX = 13,
	DMT_NETDEV_CMD_NAPI_SET = 14,
	DMT_NETDEV_CMD_BIND_TX = 15,
	DMT_NETDEV_CMD_QUEUE_CREATE = 16,
};

enum {
	DMT_NETDEV_A_DEV_IFINDEX = 1,
	DMT_NETDEV_A_DEV_PAD = 2,
	DMT_NETDEV_A_DEV_XDP_FEATURES = 3,
	DMT_NETDEV_A_DEV_XDP_ZC_MAX_SEGS = 4,
	DMT_NETDEV_A_DEV_XDP_RX_METADATA_FEATURES = 5,
	DMT_NETDEV_A_DEV_XSK_FEATURES = 6,
};

enum {
	DMT_NETDEV_A_QUEUE_ID = 1,
	DMT_NETDEV_A_QUEUE_IFINDEX = 2,
	DMT_NETDEV_A_QUEUE_TYPE = 3,
	DMT_NETDEV_A_QUEUE_NAPI_ID = 4,
	DMT_NETDEV_A_QUEUE_DMABUF = 5,
	DMT_NETDEV_A_QUEUE_IO_URING = 6,
	DMT_NETDEV_A_QUEUE_XSK = 7,
	DMT_NETDEV_A_QUEUE_LEASE = 8,
};

enum {
	DMT_NETDEV_QUEUE_TYPE_RX = 0,
	DMT_NETDEV_QUEUE_TYPE_TX = 1,
};

enum {
	DMT_NETDEV_A_QSTATS_IFINDEX = 1,
	DMT_NETDEV_A_QSTATS_QUEUE_TYPE = 2,
	DMT_NETDEV_A_QSTATS_QUEUE_ID = 3,
	DMT_NETDEV_A_QSTATS_SCOPE = 4,
	DMT_NETDEV_A_QSTATS_RX_PACKETS = 8,
	DMT_NETDEV_A_QSTATS_RX_BYTES = 9,
	DMT_NETDEV_A_QSTATS_TX_PACKETS = 10,
	DMT_NETDEV_A_QSTATS_TX_BYTES = 11,
	DMT_NETDEV_A_QSTATS_RX_ALLOC_FAIL = 12,
	DMT_NETDEV_A_QSTATS_RX_HW_DROPS = 13,
};

#define DMT_NETDEV_QSTATS_SCOPE_QUEUE 1

enum {
	DMT_NETDEV_A_DMABUF_IFINDEX = 1,
	DMT_NETDEV_A_DMABUF_QUEUES = 2,
	DMT_NETDEV_A_DMABUF_FD = 3,
	DMT_NETDEV_A_DMABUF_ID = 4,
	DMT_NETDEV_A_DMABUF_RX_PAGE_SIZE = 5,
};

/* ---- include/uapi/linux/udmabuf.h, dma-buf.h ---- */
struct dmt_udmabuf_create {
	__u32 memfd;
	__u32 flags;
	__u64 offset;
	__u64 size;
};
#define DMT_UDMABUF_FLAGS_CLOEXEC 0x01
#define DMT_UDMABUF_CREATE _IOW('u', 0x42, struct dmt_udmabuf_create)

struct dmt_dma_buf_sync {
	__u64 flags;
};
#define DMT_DMA_BUF_SYNC_READ (1 << 0)
#define DMT_DMA_BUF_SYNC_WRITE (2 << 0)
#define DMT_DMA_BUF_SYNC_RW (DMT_DMA_BUF_SYNC_READ | DMT_DMA_BUF_SYNC_WRITE)
#define DMT_DMA_BUF_SYNC_START (0 << 2)
#define DMT_DMA_BUF_SYNC_END (1 << 2)
#define DMT_DMA_BUF_IOCTL_SYNC _IOW('b', 0, struct dmt_dma_buf_sync)
/* DMA_BUF_SET_NAME_B: the argument is a pointer to the name; the size in
 * the number is that of a 64-bit pointer on every architecture. */
#define DMT_DMA_BUF_SET_NAME _IOW('b', 1, __u64)
#define DMT_DMA_BUF_NAME_LEN 32

/* include/uapi/linux/magic.h: f_type of a dma-buf's file (fstatfs) */
#define DMT_DMA_BUF_MAGIC 0x444d4142

/* ---- include/uapi/linux/ethtool_netlink{,_generated}.h (lib/nic/ethtool.c) ----
 * The ethtool netlink ids are enum members, so #ifndef cannot tell whether
 * the system header has them; the library uses these DMT_ names, whose
 * values are kernel ABI. */
#define DMT_ETHTOOL_FAMILY_NAME "ethtool"
#define DMT_ETHTOOL_FAMILY_VERSION 1

/* user -> kernel commands */
#define DMT_ETHTOOL_MSG_FEATURES_GET 11
#define DMT_ETHTOOL_MSG_FEATURES_SET 12
#define DMT_ETHTOOL_MSG_RINGS_GET 15
#define DMT_ETHTOOL_MSG_RINGS_SET 16
#define DMT_ETHTOOL_MSG_CHANNELS_GET 17
#define DMT_ETHTOOL_MSG_RSS_GET 38		/* 6.5 */
#define DMT_ETHTOOL_MSG_RSS_SET 48		/* 6.17 */
#define DMT_ETHTOOL_MSG_RSS_CREATE_ACT 49	/* 6.17 */
#define DMT_ETHTOOL_MSG_RSS_DELETE_ACT 50	/* 6.17 */
/* kernel -> user replies */
#define DMT_ETHTOOL_MSG_FEATURES_GET_REPLY 11
#define DMT_ETHTOOL_MSG_RINGS_GET_REPLY 16
#define DMT_ETHTOOL_MSG_CHANNELS_GET_REPLY 18
#define DMT_ETHTOOL_MSG_RSS_GET_REPLY 38

#define DMT_ETHTOOL_A_HEADER_DEV_INDEX 1
#define DMT_ETHTOOL_A_HEADER_DEV_NAME 2
#define DMT_ETHTOOL_A_HEADER_FLAGS 3
#define DMT_ETHTOOL_FLAG_COMPACT_BITSETS (1 << 0)
#define DMT_ETHTOOL_FLAG_OMIT_REPLY (1 << 1)

#define DMT_ETHTOOL_A_BITSET_NOMASK 1
#define DMT_ETHTOOL_A_BITSET_SIZE 2
#define DMT_ETHTOOL_A_BITSET_BITS 3
#define DMT_ETHTOOL_A_BITSET_VALUE 4
#define DMT_ETHTOOL_A_BITSET_MASK 5
#define DMT_ETHTOOL_A_BITSET_BITS_BIT 1
#define DMT_ETHTOOL_A_BITSET_BIT_INDEX 1
#define DMT_ETHTOOL_A_BITSET_BIT_NAME 2
#define DMT_ETHTOOL_A_BITSET_BIT_VALUE 3

#define DMT_ETHTOOL_A_FEATURES_HEADER 1
#define DMT_ETHTOOL_A_FEATURES_HW 2
#define DMT_ETHTOOL_A_FEATURES_WANTED 3
#define DMT_ETHTOOL_A_FEATURES_ACTIVE 4
#define DMT_ETHTOOL_A_FEATURES_NOCHANGE 5

#define DMT_ETHTOOL_A_RINGS_HEADER 1
#define DMT_ETHTOOL_A_RINGS_RX_MAX 2
#define DMT_ETHTOOL_A_RINGS_TX_MAX 5
#define DMT_ETHTOOL_A_RINGS_RX 6
#define DMT_ETHTOOL_A_RINGS_TX 9
#define DMT_ETHTOOL_A_RINGS_RX_BUF_LEN 10
#define DMT_ETHTOOL_A_RINGS_TCP_DATA_SPLIT 11	/* u8, 6.0 */
#define DMT_ETHTOOL_A_RINGS_HDS_THRESH 17	/* u32, 6.14 */
#define DMT_ETHTOOL_A_RINGS_HDS_THRESH_MAX 18	/* u32, 6.14 */

#define DMT_ETHTOOL_TCP_DATA_SPLIT_UNKNOWN 0
#define DMT_ETHTOOL_TCP_DATA_SPLIT_DISABLED 1
#define DMT_ETHTOOL_TCP_DATA_SPLIT_ENABLED 2

#define DMT_ETHTOOL_A_CHANNELS_HEADER 1
#define DMT_ETHTOOL_A_CHANNELS_RX_MAX 2
#define DMT_ETHTOOL_A_CHANNELS_TX_MAX 3
#define DMT_ETHTOOL_A_CHANNELS_OTHER_MAX 4
#define DMT_ETHTOOL_A_CHANNELS_COMBINED_MAX 5
#define DMT_ETHTOOL_A_CHANNELS_RX_COUNT 6
#define DMT_ETHTOOL_A_CHANNELS_TX_COUNT 7
#define DMT_ETHTOOL_A_CHANNELS_OTHER_COUNT 8
#define DMT_ETHTOOL_A_CHANNELS_COMBINED_COUNT 9

#define DMT_ETHTOOL_A_RSS_HEADER 1
#define DMT_ETHTOOL_A_RSS_CONTEXT 2		/* u32 */
#define DMT_ETHTOOL_A_RSS_HFUNC 3		/* u32 */
#define DMT_ETHTOOL_A_RSS_INDIR 4		/* binary u32[] */
#define DMT_ETHTOOL_A_RSS_HKEY 5		/* binary */
#define DMT_ETHTOOL_A_RSS_INPUT_XFRM 6		/* u32 */
#define DMT_ETHTOOL_A_RSS_START_CONTEXT 7	/* u32, dump filter, 6.11 */
#define DMT_ETHTOOL_A_RSS_FLOW_HASH 8		/* nest, 6.17 */

/* ---- include/uapi/linux/ethtool.h (ioctl; macros, so #ifndef works) ---- */
#ifndef ETHTOOL_GRSSH
#define ETHTOOL_GRSSH 0x00000046
#endif
#ifndef ETHTOOL_SRSSH
#define ETHTOOL_SRSSH 0x00000047
#endif
#ifndef ETH_RXFH_CONTEXT_ALLOC
#define ETH_RXFH_CONTEXT_ALLOC 0xffffffff
#endif
#ifndef ETH_RXFH_INDIR_NO_CHANGE
#define ETH_RXFH_INDIR_NO_CHANGE 0xffffffff
#endif
#ifndef FLOW_RSS
#define FLOW_RSS 0x20000000
#endif
#ifndef RX_CLS_LOC_ANY
#define RX_CLS_LOC_ANY 0xffffffff
#endif
#ifndef RX_CLS_LOC_SPECIAL
#define RX_CLS_LOC_SPECIAL 0x80000000
#endif

/* ---- io_uring zero-copy receive (lib/rx/zcrx.c) ----
 * include/uapi/linux/io_uring.h, io_uring/zcrx.h (split out in 7.1) and
 * io_uring/query.h.  Debian's linux-libc-dev and liburing predate zcrx (6.15,
 * dma-buf areas 6.16), so the structs are ours under DMT_ names; sizes and
 * offsets are kernel ABI (checked with static asserts in zcrx.c).  The
 * system call numbers come from <sys/syscall.h>; 425-427 are the numbers of
 * every architecture whose headers could lack them (alpha and mips, which
 * differ, have had them in glibc since io_uring appeared). */
#include <sys/syscall.h>
#ifndef __NR_io_uring_setup
#define __NR_io_uring_setup 425
#endif
#ifndef __NR_io_uring_enter
#define __NR_io_uring_enter 426
#endif
#ifndef __NR_io_uring_register
#define __NR_io_uring_register 427
#endif

/* SO_INCOMING_NAPI_ID (4.12): asm-generic 56, sparc 0x003a, parisc 0x4031 */
#ifndef SO_INCOMING_NAPI_ID
#if defined(__sparc__)
#define SO_INCOMING_NAPI_ID 0x003a
#elif defined(__hppa__)
#define SO_INCOMING_NAPI_ID 0x4031
#else
#define SO_INCOMING_NAPI_ID 56
#endif
#endif

/* io_uring_setup(2) flags */
#define DMT_IORING_SETUP_CQSIZE (1U << 3)
#define DMT_IORING_SETUP_CLAMP (1U << 4)
#define DMT_IORING_SETUP_R_DISABLED (1U << 6)
#define DMT_IORING_SETUP_SUBMIT_ALL (1U << 7)
#define DMT_IORING_SETUP_TASKRUN_FLAG (1U << 9)
#define DMT_IORING_SETUP_CQE32 (1U << 11)
#define DMT_IORING_SETUP_SINGLE_ISSUER (1U << 12)
#define DMT_IORING_SETUP_DEFER_TASKRUN (1U << 13)
#define DMT_IORING_SETUP_NO_SQARRAY (1U << 16)	/* 6.6 */

#define DMT_IORING_FEAT_SINGLE_MMAP (1U << 0)
#define DMT_IORING_FEAT_EXT_ARG (1U << 8)

/* mmap offsets of the rings */
#define DMT_IORING_OFF_SQ_RING 0ULL
#define DMT_IORING_OFF_CQ_RING 0x8000000ULL
#define DMT_IORING_OFF_SQES 0x10000000ULL

/* sq_ring->flags */
#define DMT_IORING_SQ_CQ_OVERFLOW (1U << 1)
#define DMT_IORING_SQ_TASKRUN (1U << 2)	/* with IORING_SETUP_TASKRUN_FLAG */

/* io_uring_enter(2) flags */
#define DMT_IORING_ENTER_GETEVENTS (1U << 0)
#define DMT_IORING_ENTER_EXT_ARG (1U << 3)

/* io_uring_register(2) opcodes */
#define DMT_IORING_REGISTER_PROBE 8
#define DMT_IORING_REGISTER_ENABLE_RINGS 12
#define DMT_IORING_REGISTER_ZCRX_IFQ 32		/* 6.15 */
#define DMT_IORING_REGISTER_QUERY 35		/* 6.18 */

/* SQE opcodes (enum io_uring_op) and their flags */
#define DMT_IORING_OP_NOP 0
#define DMT_IORING_OP_ASYNC_CANCEL 14
#define DMT_IORING_OP_RECV_ZC 58			/* 6.15 */
#define DMT_IORING_RECV_MULTISHOT (1U << 1)	/* sqe->ioprio */
#define DMT_IORING_CQE_F_MORE (1U << 1)
#define DMT_IO_URING_OP_SUPPORTED (1U << 0)

struct dmt_io_sqring_offsets {
	__u32 head;
	__u32 tail;
	__u32 ring_mask;
	__u32 ring_entries;
	__u32 flags;
	__u32 dropped;
	__u32 array;
	__u32 resv1;
	__u64 user_addr;
};

struct dmt_io_cqring_offsets {
	__u32 head;
	__u32 tail;
	__u32 ring_mask;
	__u32 ring_entries;
	__u32 overflow;
	__u32 cqes;
	__u32 flags;
	__u32 resv1;
	__u64 user_addr;
};

struct dmt_io_uring_params {
	__u32 sq_entries;
	__u32 cq_entries;
	__u32 flags;
	__u32 sq_thread_cpu;
	__u32 sq_thread_idle;
	__u32 features;
	__u32 wq_fd;
	__u32 resv[3];
	struct dmt_io_sqring_offsets sq_off;
	struct dmt_io_cqring_offsets cq_off;
};

/* struct io_uring_sqe with the members a RECV_ZC, a NOP and a cancel use */
struct dmt_io_uring_sqe {
	__u8 opcode;
	__u8 flags;
	__u16 ioprio;
	__s32 fd;
	__u64 off;
	__u64 addr;		/* ASYNC_CANCEL: the user_data to cancel */
	__u32 len;
	__u32 op_flags;
	__u64 user_data;
	__u16 buf_index;
	__u16 personality;
	__u32 zcrx_ifq_idx;	/* union with splice_fd_in, file_index */
	__u64 addr3;
	__u64 pad2;
};

struct dmt_io_uring_cqe {
	__u64 user_data;
	__s32 res;
	__u32 flags;
};

struct dmt_kernel_timespec {
	__s64 tv_sec;
	__s64 tv_nsec;
};

/* IORING_ENTER_EXT_ARG */
struct dmt_io_uring_getevents_arg {
	__u64 sigmask;
	__u32 sigmask_sz;
	__u32 min_wait_usec;	/* 6.13; pad before */
	__u64 ts;		/* struct dmt_kernel_timespec * */
};

struct dmt_io_uring_probe_op {
	__u8 op;
	__u8 resv;
	__u16 flags;
	__u32 resv2;
};

struct dmt_io_uring_probe {
	__u8 last_op;
	__u8 ops_len;
	__u16 resv;
	__u32 resv2[3];
	struct dmt_io_uring_probe_op ops[];
};

#define DMT_IORING_MEM_REGION_TYPE_USER 1

struct dmt_io_uring_region_desc {
	__u64 user_addr;
	__u64 size;
	__u32 flags;
	__u32 id;
	__u64 mmap_offset;
	__u64 resv[4];
};

/* zcrx */
#define DMT_IORING_ZCRX_AREA_SHIFT 48
#define DMT_IORING_ZCRX_AREA_MASK (~((1ULL << DMT_IORING_ZCRX_AREA_SHIFT) - 1))
#define DMT_IORING_ZCRX_AREA_DMABUF 1		/* 6.16 */
#define DMT_ZCRX_FEATURE_EVENT (1U << 1)	/* zcrx_stats in the region */
#define DMT_ZCRX_EVENT_DESC_FLAG_STATS (1U << 0)

struct dmt_zcrx_rqe {
	__u64 off;
	__u32 len;
	__u32 pad;
};

struct dmt_zcrx_cqe {
	__u64 off;
	__u64 pad;
};

struct dmt_zcrx_offsets {
	__u32 head;
	__u32 tail;
	__u32 rqes;
	__u32 resv2;
	__u64 resv[2];
};

struct dmt_zcrx_area_reg {
	__u64 addr;
	__u64 len;
	__u64 rq_area_token;
	__u32 flags;
	__u32 dmabuf_fd;
	__u64 resv2[2];
};

struct dmt_zcrx_ifq_reg {
	__u32 if_idx;
	__u32 if_rxq;
	__u32 rq_entries;
	__u32 flags;
	__u64 area_ptr;		/* struct dmt_zcrx_area_reg * */
	__u64 region_ptr;	/* struct dmt_io_uring_region_desc * */
	struct dmt_zcrx_offsets offsets;
	__u32 zcrx_id;
	__u32 rx_buf_len;	/* 7.0 */
	__u64 event_desc;	/* struct dmt_zcrx_event_desc *, ZCRX_FEATURE_EVENT */
	__u64 resv[2];
};

struct dmt_zcrx_event_desc {
	__u64 user_data;
	__u32 type_mask;
	__u32 flags;
	__u64 stats_offset;	/* in the refill ring's region */
	__u64 resv2[9];
};

struct dmt_zcrx_kstats {
	__u64 copy_count;
	__u64 copy_bytes;
};

/* IORING_REGISTER_QUERY (no ring: fd -1) */
#define DMT_IO_URING_QUERY_ZCRX 1

struct dmt_io_uring_query_hdr {
	__u64 next_entry;
	__u64 query_data;
	__u32 query_op;
	__u32 size;
	__s32 result;
	__u32 resv[3];
};

struct dmt_io_uring_query_zcrx {
	__u64 register_flags;
	__u64 area_flags;
	__u32 nr_ctrl_opcodes;
	__u32 features;
	__u32 rq_hdr_size;
	__u32 rq_hdr_alignment;
	__u64 resv2;
};

#endif
