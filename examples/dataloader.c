// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * dataloader - receive training samples straight into GPU memory.
 *
 * A plain TCP control connection carries the size of every sample; the
 * devmem TCP connection carries the payload, which lands in a dma-buf the
 * CPU cannot read.  So the framing comes from the control connection alone:
 * the received fragments are cut at sample boundaries by byte count, each
 * sample is gathered into its own contiguous GPU buffer with
 * devmemtcp_gpu_gather(), and the fragments' tokens go back to the kernel
 * only once the gather has finished (devmemtcp_gpu_release_after()).
 *
 *   receiver: dataloader -l PORT -i IFNAME [-q QUEUE] [--cpu] [--rx-page-size N]
 *   sender:   dataloader -s HOST -p PORT [-n SAMPLES]
 *   no NIC:   dataloader --synthetic [--cpu] [-n SAMPLES]
 *
 * The receiver prepares the NIC with devmemtcp_nic_open() (header split,
 * the data port's flow steered to QUEUE, default the last RX queue, the
 * buffer bound there) and undoes it at the end; the control connection
 * uses PORT + 1 and goes wherever RSS puts it.  --cpu uses a udmabuf and CPU copies instead of a GPU
 * (for machines without one, e.g. the simulated NIC in a VM).
 * --rx-page-size binds with NIC pages of N bytes (the udmabuf of --cpu is
 * then backed by huge pages, so its segments are aligned to them).
 * --synthetic plays the NIC itself: it writes the payload into free pages
 * of the buffer and hands out fragments as a receive would.  Every sample
 * carries a known pattern and is checked after it is delivered.
 */
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <getopt.h>
#include <net/if.h>
#include <netdb.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <devmemtcp.h>

#define MAX_SAMPLE (1u << 20)
#define NSLOTS 128		/* sample buffers */
#define MAX_FRAGS 64		/* fragments per receive */
#define BUF_SIZE (64u << 20)
#define PAGE 4096u

static uint8_t pattern(uint64_t sample, uint64_t k)
{
	return (uint8_t)((k + sample * 7) * 31 + (k >> 8) + sample);
}

/* The next sample's size: the sender and the synthetic NIC draw the same
 * sequence from the same seed. */
static uint32_t next_sample_size(uint64_t *seed)
{
	*seed = *seed * 6364136223846793005ull + 1442695040888963407ull;
	return 1 + (uint32_t)((*seed >> 33) % MAX_SAMPLE);
}

/* ---- the few CUDA driver calls the example needs (libcuda.so.1) --------- */

static struct cuda_calls {
	int (*init)(unsigned int);
	int (*device_get)(int *, int);
	int (*ctx_retain)(void **, int);
	int (*ctx_set)(void *);
	int (*alloc)(uint64_t *, size_t);
	int (*free)(uint64_t);
	int (*htod)(uint64_t, const void *, size_t);
	int (*dtoh)(void *, uint64_t, size_t);
	int (*stream_new)(void **, unsigned int);
	int (*stream_sync)(void *);
} cu;

/* Every driver call above, each named when the driver lacks it. */
static int cuda_open(void)
{
	static const struct {
		const char *name;
		size_t at;
	} syms[] = {
#define SYM(f, s) { s, offsetof(struct cuda_calls, f) }
		SYM(init, "cuInit"), SYM(device_get, "cuDeviceGet"),
		SYM(ctx_retain, "cuDevicePrimaryCtxRetain"), SYM(ctx_set, "cuCtxSetCurrent"),
		SYM(alloc, "cuMemAlloc_v2"), SYM(free, "cuMemFree_v2"),
		SYM(htod, "cuMemcpyHtoD_v2"), SYM(dtoh, "cuMemcpyDtoH_v2"),
		SYM(stream_new, "cuStreamCreate"), SYM(stream_sync, "cuStreamSynchronize"),
#undef SYM
	};
	void *h = dlopen("libcuda.so.1", RTLD_NOW);
	void *cctx;
	int dev, r;

	if (!h) {
		fprintf(stderr, "GPU: %s: the NVIDIA driver's libcuda.so.1 is needed\n", dlerror());
		return -1;
	}
	for (size_t i = 0; i < sizeof(syms) / sizeof(syms[0]); i++) {
		void *f = dlsym(h, syms[i].name);

		if (!f) {
			fprintf(stderr, "GPU: libcuda.so.1 has no %s: the driver is too old for this example\n",
				syms[i].name);
			return -1;
		}
		memcpy((char *)&cu + syms[i].at, &f, sizeof(f));
	}
	r = cu.init(0);
	if (!r)
		r = cu.device_get(&dev, 0);
	if (!r)
		r = cu.ctx_retain(&cctx, dev);
	if (!r)
		r = cu.ctx_set(cctx);
	if (r) {
		fprintf(stderr, "GPU: CUDA error %d setting up device 0\n", r);
		return -1;
	}
	return 0;
}

/* ---- the loader ---------------------------------------------------------- */

struct loader {
	bool cpu;
	uint32_t rx_page_size;		/* 0: the kernel's default */
	struct devmemtcp_buf *buf;	/* where payload lands */
	uint8_t *host_pool;		/* synthetic --cpu without udmabuf */
	struct devmemtcp_gpu *gpu;
	void *stream;
	uint64_t slot_dev[NSLOTS];	/* GPU sample buffers */
	uint8_t *slot_host[NSLOTS];	/* --cpu sample buffers */
	int ctrl;			/* control socket, -1: synthetic */
	const uint32_t *sizes;		/* synthetic: the sample sizes */
	uint64_t sample;		/* sample being filled */
	uint64_t size;			/* its size, 0: not read yet */
	uint64_t filled;		/* its bytes so far */
	uint64_t done, bytes, bad;
};

static int next_size(struct loader *L)
{
	uint32_t v;
	size_t got = 0;

	if (L->ctrl < 0) {
		L->size = L->sizes[L->sample];
		return 0;
	}
	while (got < sizeof(v)) {
		ssize_t r = read(L->ctrl, (char *)&v + got, sizeof(v) - got);

		if (r <= 0)
			return -1;
		got += (size_t)r;
	}
	L->size = ntohl(v);
	if (!L->size || L->size > MAX_SAMPLE) {
		fprintf(stderr, "bad sample size %llu on the control connection\n",
			(unsigned long long)L->size);
		return -1;
	}
	return 0;
}

/* A sample is complete: here a trainer would take it; we check it. */
static void deliver(struct loader *L, uint64_t sample, uint64_t size)
{
	static uint8_t tmp[MAX_SAMPLE];
	const uint8_t *p = L->slot_host[sample % NSLOTS];

	if (!L->cpu) {
		cu.stream_sync(L->stream);
		cu.dtoh(tmp, L->slot_dev[sample % NSLOTS], size);
		p = tmp;
	}
	for (uint64_t k = 0; k < size; k++)
		if (p[k] != pattern(sample, k)) {
			if (!L->bad++)
				fprintf(stderr, "sample %llu byte %llu: %#x, want %#x\n",
					(unsigned long long)sample,
					(unsigned long long)k, p[k],
					pattern(sample, k));
			break;
		}
	L->done++;
	L->bytes += size;
}

static int cpu_copy(struct loader *L, const struct devmemtcp_frag *f,
		    uint64_t skip, uint8_t *dst, uint64_t len,
		    const uint8_t *linear)
{
	if (f->flags & DEVMEMTCP_FRAG_LINEAR) {
		memcpy(dst, linear + f->offset + skip, len);
		return 0;
	}
	if (L->host_pool) {
		memcpy(dst, L->host_pool + f->offset + skip, len);
		return 0;
	}
	return devmemtcp_buf_read(L->buf, f->offset + skip, dst, len);
}

/*
 * Hand n received fragments to their samples.  GPU: one gather for all of
 * them into as many destinations as samples they touch (linear fragments,
 * a rare steering miss, are copied in by the CPU).  CPU: copies.
 */
static int consume(struct loader *L, const struct devmemtcp_frag *f, size_t n,
		   const uint8_t *linear)
{
	struct devmemtcp_gpu_iov dst[NSLOTS];
	uint64_t done_sample[NSLOTS], done_size[NSLOTS];
	size_t ndst = 0, ndone = 0;
	int ret;

	for (size_t i = 0; i < n; i++) {
		for (uint64_t off = 0; off < f[i].len;) {
			uint64_t take;

			if (!L->size && next_size(L))
				return -1;
			take = L->size - L->filled;
			if (take > f[i].len - off)
				take = f[i].len - off;
			if (L->cpu) {
				ret = cpu_copy(L, &f[i], off,
					       L->slot_host[L->sample % NSLOTS] + L->filled,
					       take, linear);
				if (ret)
					return ret;
			} else {
				uint64_t a = L->slot_dev[L->sample % NSLOTS] + L->filled;

				if (ndst && dst[ndst - 1].addr + dst[ndst - 1].len == a)
					dst[ndst - 1].len += take;
				else if (ndst == NSLOTS)
					return -E2BIG;	/* a receive spanning 128 samples */
				else
					dst[ndst++] = (struct devmemtcp_gpu_iov){ a, take };
				if (f[i].flags & DEVMEMTCP_FRAG_LINEAR)
					cu.htod(a, linear + f[i].offset + off, take);
			}
			off += take;
			L->filled += take;
			if (L->filled == L->size) {
				done_sample[ndone] = L->sample;
				done_size[ndone++] = L->size;
				L->sample++;
				L->size = L->filled = 0;
			}
		}
	}
	if (!L->cpu && ndst) {
		ret = devmemtcp_gpu_gather(L->gpu, f, n, dst, ndst, L->stream);
		if (ret) {
			fprintf(stderr, "gather: %s\n", devmemtcp_gpu_errmsg(L->gpu));
			return ret;
		}
	}
	for (size_t i = 0; i < ndone; i++)
		deliver(L, done_sample[i], done_size[i]);
	return 0;
}

/* ---- synthetic NIC ------------------------------------------------------- */

struct held {
	struct devmemtcp_gpu_fence *fence;	/* NULL: free at once */
	uint32_t pages[MAX_FRAGS];
	size_t n;
};

#define NHELD 64	/* receives the GPU may still be reading */

/* Pages come back once the GPU is done with them: make room for one more
 * receive of MAX_FRAGS pages. */
static int reclaim(struct held *ring, size_t *head, size_t *len,
		   uint32_t *freel, uint32_t *nfree)
{
	while (*len && (*len == NHELD || *nfree < MAX_FRAGS)) {
		struct held *o = &ring[*head];

		if (o->fence && devmemtcp_gpu_fence_done(o->fence, true) != 1)
			return -1;
		for (size_t i = 0; i < o->n; i++)
			freel[(*nfree)++] = o->pages[i];
		*head = (*head + 1) % NHELD;
		(*len)--;
	}
	return 0;
}

static int synthetic(struct loader *L, uint32_t nsamples)
{
	uint32_t npages = BUF_SIZE / PAGE, nfree = npages, *freel;
	uint32_t *sizes = calloc(nsamples, sizeof(*sizes));
	struct held ring[NHELD];
	size_t head = 0, len = 0;
	uint64_t total = 0, sent = 0, sample = 0, in_sample = 0;
	uint64_t base = 0;
	static uint8_t payload[PAGE];
	uint64_t seed = 42;

	freel = malloc(npages * sizeof(*freel));
	for (uint32_t i = 0; i < npages; i++)
		freel[i] = (i * 7919u) % npages;	/* pages in scattered order */
	for (uint32_t i = 0; i < nsamples; i++) {
		sizes[i] = next_sample_size(&seed);
		total += sizes[i];
	}
	L->sizes = sizes;
	if (!L->cpu) {
		const struct devmemtcp_segment *seg;

		devmemtcp_buf_segments(L->buf, &seg);
		base = seg[0].addr;
	}
	while (sent < total) {
		struct devmemtcp_frag f[MAX_FRAGS];
		struct held *h;
		size_t n = 0;

		if (reclaim(ring, &head, &len, freel, &nfree))
			return -1;
		h = &ring[(head + len) % NHELD];
		h->n = 0;
		/* One "receive": payload of up to MAX_FRAGS packets of 1448 or
		 * 4096 bytes, each at the start of a free page. */
		while (n < MAX_FRAGS && sent < total) {
			uint32_t page = freel[--nfree];
			uint32_t l = (n & 1) ? 1448 : PAGE;

			if (l > total - sent)
				l = (uint32_t)(total - sent);
			for (uint32_t k = 0; k < l; k++) {
				if (in_sample == sizes[sample]) {
					sample++;
					in_sample = 0;
				}
				payload[k] = pattern(sample, in_sample++);
			}
			if (L->cpu && L->host_pool)
				memcpy(L->host_pool + (uint64_t)page * PAGE, payload, l);
			else if (L->cpu)
				devmemtcp_buf_write(L->buf, (uint64_t)page * PAGE,
						    payload, l);
			else
				cu.htod(base + (uint64_t)page * PAGE, payload, l);
			f[n] = (struct devmemtcp_frag){
				.offset = (uint64_t)page * PAGE,
				.addr = L->cpu ? 0 : base + (uint64_t)page * PAGE,
				.len = l, .token = page, .binding_id = 1 };
			h->pages[h->n++] = page;
			sent += l;
			n++;
		}
		if (consume(L, f, n, NULL))
			return -1;
		h->fence = NULL;
		if (!L->cpu &&
		    devmemtcp_gpu_fence_new(L->gpu, L->stream, &h->fence))
			return -1;
		len++;
	}
	while (len) {
		if (ring[head].fence)
			devmemtcp_gpu_fence_done(ring[head].fence, true);
		head = (head + 1) % NHELD;
		len--;
	}
	free(freel);
	free(sizes);
	return 0;
}

/* ---- network ------------------------------------------------------------- */

static int tcp_listen(int port)
{
	struct sockaddr_in6 a = { .sin6_family = AF_INET6,
				  .sin6_port = htons((uint16_t)port),
				  .sin6_addr = IN6ADDR_ANY_INIT };
	int one = 1, s = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (s < 0)
		return -1;
	setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(s, (struct sockaddr *)&a, sizeof(a)) || listen(s, 1)) {
		close(s);
		return -1;
	}
	return s;
}

static int tcp_accept(int s)
{
	int c = accept4(s, NULL, NULL, SOCK_CLOEXEC);

	close(s);
	return c;
}

static int tcp_connect(const char *host, int port)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *ai;
	char p[16];
	int s;

	snprintf(p, sizeof(p), "%d", port);
	if (getaddrinfo(host, p, &hints, &ai))
		return -1;
	s = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s >= 0 && connect(s, ai->ai_addr, ai->ai_addrlen)) {
		close(s);
		s = -1;
	}
	freeaddrinfo(ai);
	return s;
}

static int write_all(int fd, const void *p, size_t n)
{
	while (n) {
		ssize_t w = write(fd, p, n);

		if (w <= 0)
			return -1;
		p = (const char *)p + w;
		n -= (size_t)w;
	}
	return 0;
}

static int send_samples(const char *host, int port, uint32_t nsamples)
{
	static uint8_t payload[MAX_SAMPLE];
	int ctrl = tcp_connect(host, port + 1), data;
	uint64_t seed = 42;

	data = ctrl < 0 ? -1 : tcp_connect(host, port);
	if (data < 0) {
		perror("connect");
		return 1;
	}
	for (uint32_t i = 0; i < nsamples; i++) {
		uint32_t size = next_sample_size(&seed), be = htonl(size);

		for (uint32_t k = 0; k < size; k++)
			payload[k] = pattern(i, k);
		if (write_all(ctrl, &be, sizeof(be)) ||
		    write_all(data, payload, size)) {
			perror("write");
			return 1;
		}
	}
	close(data);
	close(ctrl);
	return 0;
}

/* Receive to the end of the stream, handing the fragments to samples. */
static int receive_all(struct loader *L, struct devmemtcp_rx *rx)
{
	static uint8_t linear[64 << 10];
	struct devmemtcp_frag f[MAX_FRAGS];
	int ret = 0;

	while (!ret) {
		int n = devmemtcp_rx_recv(rx, f, MAX_FRAGS, linear,
					  sizeof(linear));

		if (n <= 0) {
			if (n < 0)
				fprintf(stderr, "recv: %s\n",
					devmemtcp_rx_errmsg(rx));
			return n;
		}
		ret = consume(L, f, (size_t)n, linear);
		if (ret)
			break;
		/* GPU: tokens go back once the gather has read the bytes. */
		ret = L->cpu ? devmemtcp_rx_release(rx, f, (size_t)n)
			     : devmemtcp_gpu_release_after(L->gpu, rx, f,
							   (size_t)n, L->stream);
	}
	return ret;
}

/*
 * Prepare the NIC (header split, the data port's flow steered to one
 * queue, the buffer bound to it; all undone at the end), then receive.
 */
static int receive(struct loader *L, struct devmemtcp_ctx *ctx, int port,
		   const char *ifname, int queue)
{
	struct devmemtcp_binding *binding;
	struct devmemtcp_flow flow;
	struct devmemtcp_nic *nic;
	struct devmemtcp_rx *rx = NULL;
	uint32_t q = (uint32_t)queue;
	int lctrl, ldata, data = -1, ret;
	char rule[64];

	snprintf(rule, sizeof(rule), "tcp4 dst-port %d", port);
	devmemtcp_flow_parse(rule, &flow);
	{
		DEVMEMTCP_OPTS(bind_opts, bo, .rx_page_size = L->rx_page_size);
		DEVMEMTCP_OPTS(nic_opts, no, .queues = queue >= 0 ? &q : NULL,
			       .nqueues = 1, .flows = &flow, .nflows = 1,
			       .buf = L->buf, .bind_opts = &bo);

		ret = devmemtcp_nic_open(ctx, ifname, &no, &nic);
	}
	if (ret) {
		fprintf(stderr, "NIC setup: %s\n", devmemtcp_ctx_errmsg(ctx));
		return ret;
	}
	binding = devmemtcp_nic_binding(nic);
	lctrl = tcp_listen(port + 1);
	ldata = tcp_listen(port);
	if (lctrl < 0 || ldata < 0) {
		perror("listen");
		ret = -1;
		goto out;
	}
	printf("%s: binding %u; samples on port %d, sizes on port %d\n",
	       ifname, devmemtcp_binding_id(binding), port, port + 1);
	fflush(stdout);
	L->ctrl = tcp_accept(lctrl);
	data = tcp_accept(ldata);
	if (L->ctrl < 0 || data < 0) {
		perror("accept");
		ret = -1;
		goto out;
	}
	ret = devmemtcp_rx_new(ctx, data, NULL, &rx);
	if (ret)
		fprintf(stderr, "receiver: %s\n", devmemtcp_ctx_errmsg(ctx));
	if (!ret) {
		ret = devmemtcp_rx_add_buf(rx, devmemtcp_binding_id(binding),
					   L->buf);
		if (ret)
			fprintf(stderr, "receiver: %s\n", devmemtcp_rx_errmsg(rx));
	}
	if (!ret)
		ret = receive_all(L, rx);
	if (rx) {
		struct devmemtcp_rx_stats st = { .sz = sizeof(st) };

		devmemtcp_rx_stats(rx, &st);
		printf("%llu fragments in device memory, %llu linear bytes, %llu steering misses\n",
		       (unsigned long long)st.frags,
		       (unsigned long long)st.linear_bytes,
		       (unsigned long long)st.steering_misses);
	}
	devmemtcp_rx_free(rx);
out:
	if (data >= 0)
		close(data);
	if (L->ctrl >= 0)
		close(L->ctrl);
	devmemtcp_nic_close(nic);
	return ret;
}

/* GPU: the payload lands in GPU memory and samples are gathered into GPU
 * buffers. */
static int loader_open_gpu(struct loader *L, struct devmemtcp_ctx *ctx)
{
	DEVMEMTCP_OPTS(buf_opts, bo, .provider = DEVMEMTCP_PROVIDER_CUDA,
		       .size = BUF_SIZE);
	int ret = devmemtcp_gpu_new(ctx, NULL, &L->gpu);

	if (!ret)
		ret = devmemtcp_buf_new(ctx, &bo, &L->buf);
	if (ret) {
		fprintf(stderr, "GPU: %s\n(run with --cpu on machines without an NVIDIA GPU)\n",
			devmemtcp_ctx_errmsg(ctx));
		return -1;
	}
	if (cuda_open()) {
		fprintf(stderr, "(run with --cpu on machines without an NVIDIA GPU)\n");
		return -1;
	}
	ret = cu.stream_new(&L->stream, 1);
	if (ret) {
		fprintf(stderr, "GPU: cuStreamCreate: CUDA error %d\n", ret);
		return -1;
	}
	for (int i = 0; i < NSLOTS; i++) {
		ret = cu.alloc(&L->slot_dev[i], MAX_SAMPLE);
		if (ret) {
			fprintf(stderr, "GPU: cuMemAlloc_v2 of a sample buffer: CUDA error %d\n", ret);
			return -1;
		}
	}
	return 0;
}

/* --cpu: a udmabuf and host sample buffers.  Without udmabuf the synthetic
 * NIC can still write plain host memory. */
static int loader_open_cpu(struct loader *L, struct devmemtcp_ctx *ctx,
			   bool synth)
{
	DEVMEMTCP_OPTS(buf_opts, bo, .provider = DEVMEMTCP_PROVIDER_UDMABUF,
		       .size = BUF_SIZE,
		       .flags = L->rx_page_size > PAGE ? DEVMEMTCP_BUF_HUGETLB : 0);

	if (devmemtcp_buf_new(ctx, &bo, &L->buf)) {
		if (!synth) {
			fprintf(stderr, "udmabuf: %s\n", devmemtcp_ctx_errmsg(ctx));
			return -1;
		}
		fprintf(stderr, "udmabuf unavailable (%s): the synthetic NIC writes plain host memory\n",
			devmemtcp_ctx_errmsg(ctx));
		L->host_pool = malloc(BUF_SIZE);
	}
	for (int i = 0; i < NSLOTS; i++)
		L->slot_host[i] = malloc(MAX_SAMPLE);
	return 0;
}

static void loader_close(struct loader *L)
{
	for (int i = 0; i < NSLOTS; i++) {
		if (L->slot_dev[i] && cu.free)
			cu.free(L->slot_dev[i]);
		free(L->slot_host[i]);
	}
	free(L->host_pool);
	devmemtcp_buf_free(L->buf);
	devmemtcp_gpu_free(L->gpu);
}

static void usage(const char *me)
{
	fprintf(stderr,
		"usage: %s -l PORT -i IFNAME [-q QUEUE] [--cpu] [--rx-page-size N] receive\n"
		"       %s -s HOST -p PORT [-n SAMPLES]          send\n"
		"       %s --synthetic [--cpu] [-n SAMPLES]     no NIC\n",
		me, me, me);
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "synthetic", no_argument, NULL, 'S' },
		{ "cpu", no_argument, NULL, 'C' },
		{ "rx-page-size", required_argument, NULL, 'P' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	const char *host = NULL, *ifname = NULL;
	int opt, port = 0, listen_port = 0, queue = -1, ret;
	uint32_t nsamples = 200;
	bool synth = false;
	struct loader L = { .ctrl = -1 };
	struct devmemtcp_ctx *ctx;

	while ((opt = getopt_long(argc, argv, "l:i:q:s:p:n:h", lo, NULL)) != -1) {
		switch (opt) {
		case 'l': listen_port = atoi(optarg); break;
		case 'i': ifname = optarg; break;
		case 'q': queue = atoi(optarg); break;
		case 's': host = optarg; break;
		case 'p': port = atoi(optarg); break;
		case 'n': nsamples = (uint32_t)atoi(optarg); break;
		case 'S': synth = true; break;
		case 'C': L.cpu = true; break;
		case 'P': L.rx_page_size = (uint32_t)atoi(optarg); break;
		default:
			usage(argv[0]);
			return opt == 'h' ? 0 : 2;
		}
	}
	if (host)
		return send_samples(host, port, nsamples);
	if (!synth && (!listen_port || !ifname)) {
		usage(argv[0]);
		return 2;
	}
	if (devmemtcp_ctx_new(NULL, &ctx))
		return 1;
	ret = L.cpu ? loader_open_cpu(&L, ctx, synth) : loader_open_gpu(&L, ctx);
	if (!ret) {
		ret = synth ? synthetic(&L, nsamples)
			    : receive(&L, ctx, listen_port, ifname, queue);
		if (!synth && !ret && L.size)
			ret = -1;	/* the stream ended inside a sample */
		printf("%s%s: %llu samples, %llu bytes, %llu bad\n",
		       synth ? "synthetic" : "received",
		       L.cpu ? " (CPU copies)" : " (GPU gather)",
		       (unsigned long long)L.done, (unsigned long long)L.bytes,
		       (unsigned long long)L.bad);
	}
	loader_close(&L);
	devmemtcp_ctx_free(ctx);
	return ret || L.bad || (synth && L.done != nsamples) ? 1 : 0;
}
