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

/* ---- include/uapi/linux/ethtool_netlink{,_generated}.h (lib/ethtool.c) ----
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

#endif
