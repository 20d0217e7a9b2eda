// SPDX-License-Identifier: GPL-2.0-only
/*
 * devmemsim devices: the module parameters, module init/exit and the two
 * devices it makes.  Each net_device has a parent device its DMA goes
 * through: a platform device "devmemsim.N" (parent=platform, the default),
 * where a DMA address is a physical address, or a PCI device this module
 * binds as a PCI driver (parent=pci: QEMU's edu or pci-testdev), which sits
 * behind the machine's IOMMU when it has one.  dma-buf attachments and page
 * pools map through the parent; dsim_dma_va() turns a DMA address back into
 * the kernel address a "DMA" reads or writes, through the parent's IOMMU
 * domain when that domain translates.  The devices are peers: what one
 * sends the other receives.
 *
 * Copyright (c) the libdevmemtcp authors.
 */

#include "devmemsim.h"

#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/dma-mapping.h>
#include <linux/dma-direct.h>
#include <linux/etherdevice.h>
#include <linux/iommu.h>
#include <linux/pci.h>
#include <linux/rtnetlink.h>
#include <net/page_pool/helpers.h>

static int num_queues = 16;
module_param(num_queues, int, 0444);
MODULE_PARM_DESC(num_queues, "RX and TX queues per device (1-64, default 16)");

static char *name0 = "dsim0";
module_param(name0, charp, 0444);
MODULE_PARM_DESC(name0, "name of the first device (default dsim0)");

static char *name1 = "dsim1";
module_param(name1, charp, 0444);
MODULE_PARM_DESC(name1, "name of the second device (default dsim1)");

static char *parent = "platform";
module_param(parent, charp, 0444);
MODULE_PARM_DESC(parent, "parent devices: platform (default; DMA address = physical address) or pci (two QEMU edu or pci-testdev devices, behind the IOMMU if there is one)");

static unsigned int rx_buf_size;
module_param(rx_buf_size, uint, 0444);
MODULE_PARM_DESC(rx_buf_size, "RX buffer size: 0 (default) = one NIC page per buffer; 1024, 2048 or 4096 = several buffers per NIC page (page-pool fragments)");

static bool rx_pack;
module_param(rx_pack, bool, 0444);
MODULE_PARM_DESC(rx_pack, "pack received payloads back to back in NIC pages (page-pool fragments)");

static char *profile = "default";
module_param(profile, charp, 0444);
MODULE_PARM_DESC(profile, "the driver whose answers the devices give: default (the simulated NIC), gve, bnxt, mlx5 or fbnic (sim/module/PROFILES.md)");

static bool rx_mix;
module_param(rx_mix, bool, 0444);
MODULE_PARM_DESC(rx_mix, "the wire carries TCP segments of mixed sizes, 1 byte to one MSS");

static struct dsim_priv *dsim_privs[2];
static DEFINE_MUTEX(dsim_lock);		/* the pair and the PCI parents */
static struct pci_dev *dsim_pci_devs[2];
static unsigned int dsim_npci;

/* ------------------------------------------------------------------ */
/* DMA                                                                 */

/*
 * Where a "DMA" at device address @dma lands, as a kernel virtual address,
 * and in *@n how many of the @len bytes from there are contiguous: up to
 * the end of that page, the granularity at which an IOMMU maps.  NULL
 * (and a counted fault) when nothing is mapped there or it is not RAM.
 */
void *dsim_dma_va(struct dsim_priv *priv, dma_addr_t dma, unsigned int len,
		  unsigned int *n)
{
	phys_addr_t pa;

	*n = min_t(unsigned int, len, PAGE_SIZE - offset_in_page(dma));
	if (priv->iommu)
		pa = iommu_iova_to_phys(priv->iommu, dma);
	else
		pa = dma_to_phys(priv->dmadev, dma);
	if (!*n || !pa || !pfn_valid(PHYS_PFN(pa))) {
		atomic64_inc(&priv->dma_faults);
		pr_warn_ratelimited("%s: DMA fault at %pad (%s)\n",
				    netdev_name(priv->dev), &dma, dsim_dma_mode(priv));
		return NULL;
	}
	if (PHYS_PFN(pa) != PHYS_PFN(dma))
		atomic64_inc(&priv->dma_remapped);
	return phys_to_virt(pa);
}

const char *dsim_dma_mode(const struct dsim_priv *priv)
{
	return priv->iommu ? "iommu" : "direct";
}

/* The parent's IOMMU domain if it translates; an identity (passthrough)
 * domain or no IOMMU means DMA address = physical address.
 */
static struct iommu_domain *dsim_translating_domain(struct device *dev)
{
	struct iommu_domain *dom = iommu_get_domain_for_dev(dev);

	return dom && (dom->type & __IOMMU_DOMAIN_PAGING) ? dom : NULL;
}

/* ------------------------------------------------------------------ */
/* parents                                                             */

static struct platform_device *dsim_pdev_create(int id)
{
	struct platform_device *pdev;
	int err;

	pdev = platform_device_register_simple(DSIM_DRV_NAME, id, NULL, 0);
	if (IS_ERR(pdev))
		return pdev;
	/* 64-bit DMA, no IOMMU: DMA address == physical address */
	err = dma_coerce_mask_and_coherent(&pdev->dev, DMA_BIT_MASK(64));
	if (err) {
		platform_device_unregister(pdev);
		return ERR_PTR(err);
	}
	return pdev;
}

static bool dsim_parent_is_pci(void)
{
	return !strcmp(parent, "pci");
}

/* ------------------------------------------------------------------ */
/* the pair                                                            */

/* Defaults: rings 1024, header split off, hds-thresh 256, ntuple on. */
static void dsim_priv_init(struct dsim_priv *priv, struct net_device *dev,
			   struct device *dmadev)
{
	priv->dev = dev;
	priv->dmadev = dmadev;
	priv->iommu = dsim_translating_domain(dmadev);
	priv->layout.buf_size = rx_buf_size;
	priv->layout.pack = rx_pack;
	priv->layout.mix = rx_mix;
	atomic64_set(&priv->dma_faults, 0);
	atomic64_set(&priv->dma_remapped, 0);
	priv->nq = num_queues;
	priv->rx_ring = DSIM_RING_DEFAULT;
	priv->tx_ring = DSIM_RING_DEFAULT;
	priv->hds = false;
#if DSIM_HAVE_HDS_THRESH
	priv->hds_thresh = DSIM_HDS_THRESH_DEFAULT;
	dev->cfg->hds_thresh = DSIM_HDS_THRESH_DEFAULT;
#else
	priv->hds_thresh = 0;
#endif
	spin_lock_init(&priv->cfg_lock);
	spin_lock_init(&priv->fault_lock);
	atomic_set(&priv->fail_restart, 0);
	atomic_set(&priv->fail_alloc, 0);
	/* the kernel's key: 52 bytes on 6.12, 256 on 7.x; fbnic's is 54 */
	netdev_rss_key_fill(priv->key, min_t(size_t, sizeof(priv->key), NETDEV_RSS_KEY_LEN));
	if (sizeof(priv->key) > NETDEV_RSS_KEY_LEN)
		get_random_bytes(priv->key + NETDEV_RSS_KEY_LEN,
				 sizeof(priv->key) - NETDEV_RSS_KEY_LEN);
	dsim_profile_init_priv(priv);
	dsim_fill_indir(priv->indir, priv->indir_size, num_queues);
	eth_hw_addr_random(dev);
}

static int dsim_queues_init(struct dsim_priv *priv, int id)
{
	unsigned int i;

	priv->rq = kcalloc(priv->nq, sizeof(*priv->rq), GFP_KERNEL);
	priv->tq = kcalloc(priv->nq, sizeof(*priv->tq), GFP_KERNEL);
	priv->rules = kvcalloc(priv->max_rules, sizeof(*priv->rules), GFP_KERNEL);
	if (!priv->rq || !priv->tq || !priv->rules) {
		kfree(priv->rq);
		kfree(priv->tq);
		kvfree(priv->rules);
		return -ENOMEM;
	}
	for (i = 0; i < priv->nq; i++) {
		struct dsim_rq *rq = &priv->rq[i];

		rq->priv = priv;
		rq->idx = i;
		/* the same segment sizes on every run */
		prandom_seed_state(&rq->mix, 0x5eed0000ull + (id << 8) + i);
		skb_queue_head_init(&rq->backlog);
		u64_stats_init(&rq->stats.syncp);
		u64_stats_init(&priv->tq[i].stats.syncp);
		netif_napi_add(priv->dev, &rq->napi, dsim_poll);
	}
	return 0;
}

/* Device @id named @name on parent @pci (NULL: a platform parent). */
static struct dsim_priv *dsim_create(const char *name, int id, struct pci_dev *pci)
{
	struct platform_device *pdev = NULL;
	struct net_device *dev;
	struct device *dmadev;
	struct dsim_priv *priv;
	int err;

	if (pci) {
		dmadev = &pci->dev;
	} else {
		pdev = dsim_pdev_create(id);
		if (IS_ERR(pdev))
			return ERR_CAST(pdev);
		dmadev = &pdev->dev;
	}
	dev = alloc_netdev_mqs(sizeof(*priv), name, NET_NAME_USER, dsim_setup,
			       num_queues, num_queues);
	if (!dev) {
		err = -ENOMEM;
		goto err_pdev;
	}
	SET_NETDEV_DEV(dev, dmadev);
	priv = netdev_priv(dev);
	priv->pdev = pdev;
	dsim_priv_init(priv, dev, dmadev);
	err = dsim_queues_init(priv, id);
	if (err)
		goto err_netdev;
	return priv;

err_netdev:
	free_netdev(dev);
err_pdev:
	if (pdev)
		platform_device_unregister(pdev);
	return ERR_PTR(err);
}

static void dsim_free(struct dsim_priv *priv)
{
	struct platform_device *pdev = priv->pdev;
	unsigned int i;

	for (i = 0; i < priv->nq; i++) {
		netif_napi_del(&priv->rq[i].napi);
		skb_queue_purge(&priv->rq[i].backlog);
		/* 6.12 can leave a pool behind on a closed device */
		if (priv->rq[i].pp)
			page_pool_destroy(priv->rq[i].pp);
	}
	kfree(priv->rq);
	kfree(priv->tq);
	kvfree(priv->rules);
	free_netdev(priv->dev);
	if (pdev)
		platform_device_unregister(pdev);
}

static int dsim_register_pair(void)
{
	int err;

	err = register_netdev(dsim_privs[0]->dev);
	if (err)
		return err;
	err = register_netdev(dsim_privs[1]->dev);
	if (err) {
		unregister_netdev(dsim_privs[0]->dev);
		return err;
	}
	netif_carrier_on(dsim_privs[0]->dev);
	netif_carrier_on(dsim_privs[1]->dev);
	return 0;
}

/* "one NIC page", "2048 bytes" or "packed", and whether segments vary. */
void dsim_layout_str(const struct dsim_layout *lo, char *s, size_t len)
{
	char size[32];

	if (lo->pack && lo->align)
		snprintf(size, sizeof(size), "packed at %u-byte steps", lo->align);
	else
		snprintf(size, sizeof(size), lo->pack ? "packed" : "%u bytes", lo->buf_size);
	snprintf(s, len, "%s%s",
		 lo->pack || lo->buf_size ? size : "one NIC page",
		 lo->mix ? ", TCP segments of mixed sizes" : "");
}

static void dsim_pair_log(void)
{
	const struct dsim_priv *a = dsim_privs[0], *b = dsim_privs[1];
	char lo[64];

	dsim_layout_str(&a->layout, lo, sizeof(lo));
	pr_info("created %s and %s with %d queues each; parents %s and %s, DMA %s and %s; RX buffers: %s; profile %s\n",
		netdev_name(a->dev), netdev_name(b->dev), num_queues,
		dev_name(a->dmadev), dev_name(b->dmadev), dsim_dma_mode(a),
		dsim_dma_mode(b), lo, dsim_prof->name);
}

/* Called with dsim_lock held; @pci: the two PCI parents, or NULL. */
static int dsim_pair_create(struct pci_dev **pci)
{
	int err, i;

	for (i = 0; i < 2; i++) {
		dsim_privs[i] = dsim_create(i ? name1 : name0, i, pci ? pci[i] : NULL);
		if (IS_ERR(dsim_privs[i])) {
			err = PTR_ERR(dsim_privs[i]);
			dsim_privs[i] = NULL;
			goto err_free;
		}
	}
	rcu_assign_pointer(dsim_privs[0]->peer, dsim_privs[1]);
	rcu_assign_pointer(dsim_privs[1]->peer, dsim_privs[0]);

	err = dsim_register_pair();
	if (err)
		goto err_free;

	dsim_debugfs_add(dsim_privs[0]);
	dsim_debugfs_add(dsim_privs[1]);
	dsim_pair_log();
	return 0;

err_free:
	for (i = 0; i < 2; i++) {
		if (dsim_privs[i])
			dsim_free(dsim_privs[i]);
		dsim_privs[i] = NULL;
	}
	return err;
}

/* Called with dsim_lock held; nothing when the pair is gone already. */
static void dsim_pair_destroy(void)
{
	LIST_HEAD(list);
	int i;

	if (!dsim_privs[0])
		return;
	dsim_debugfs_remove(dsim_privs[0]);
	dsim_debugfs_remove(dsim_privs[1]);

	RCU_INIT_POINTER(dsim_privs[0]->peer, NULL);
	RCU_INIT_POINTER(dsim_privs[1]->peer, NULL);
	synchronize_net();

	rtnl_lock();
	unregister_netdevice_queue(dsim_privs[0]->dev, &list);
	unregister_netdevice_queue(dsim_privs[1]->dev, &list);
	unregister_netdevice_many(&list);
	rtnl_unlock();

	for (i = 0; i < 2; i++) {
		dsim_free(dsim_privs[i]);
		dsim_privs[i] = NULL;
	}
}

/* ------------------------------------------------------------------ */
/* PCI parents (parent=pci)                                            */

/* QEMU devices without a driver of their own; no MODULE_DEVICE_TABLE, so
 * they never load this module by themselves.
 */
static const struct pci_device_id dsim_pci_ids[] = {
	{ PCI_DEVICE(0x1234, 0x11e8) },	/* edu */
	{ PCI_DEVICE(0x1b36, 0x0005) },	/* pci-testdev */
	{ }
};

static int dsim_pci_probe(struct pci_dev *pci, const struct pci_device_id *id)
{
	int err = -ENODEV;	/* a third device stays unbound, quietly */

	mutex_lock(&dsim_lock);
	if (dsim_npci >= ARRAY_SIZE(dsim_pci_devs))
		goto out;
	err = pcim_enable_device(pci);
	if (err)
		goto out;
	pci_set_master(pci);
	err = dma_set_mask_and_coherent(&pci->dev, DMA_BIT_MASK(64));
	if (err)
		goto out;
	dsim_pci_devs[dsim_npci++] = pci;
out:
	mutex_unlock(&dsim_lock);
	return err;
}

static void dsim_pci_remove(struct pci_dev *pci)
{
	unsigned int i;

	mutex_lock(&dsim_lock);
	/* the pair uses both parents: one going away takes the pair down */
	dsim_pair_destroy();
	for (i = 0; i < dsim_npci; i++)
		if (dsim_pci_devs[i] == pci)
			break;
	if (i < dsim_npci) {
		dsim_npci--;
		memmove(&dsim_pci_devs[i], &dsim_pci_devs[i + 1],
			(dsim_npci - i) * sizeof(dsim_pci_devs[0]));
	}
	mutex_unlock(&dsim_lock);
}

static struct pci_driver dsim_pci_driver = {
	.name		= DSIM_DRV_NAME,
	.id_table	= dsim_pci_ids,
	.probe		= dsim_pci_probe,
	.remove		= dsim_pci_remove,
};

/* ------------------------------------------------------------------ */
/* module                                                              */

static int dsim_check_params(void)
{
	if (num_queues < 1 || num_queues > DSIM_MAX_QUEUES) {
		pr_err("num_queues must be 1..%d\n", DSIM_MAX_QUEUES);
		return -EINVAL;
	}
	if (rx_buf_size && (!is_power_of_2(rx_buf_size) ||
			    rx_buf_size < DSIM_MIN_BUF_SIZE || rx_buf_size > PAGE_SIZE)) {
		pr_err("rx_buf_size must be 0 or a power of two from %u to %lu\n",
		       DSIM_MIN_BUF_SIZE, PAGE_SIZE);
		return -EINVAL;
	}
	if (rx_buf_size && rx_pack) {
		pr_err("rx_buf_size and rx_pack exclude each other\n");
		return -EINVAL;
	}
	if (dsim_profile_select(profile))
		return -EINVAL;
	if ((rx_buf_size || rx_pack) && dsim_prof->id != DSIM_PROF_DEFAULT) {
		pr_err("rx_buf_size and rx_pack are for profile=default: profile=%s places payloads as its driver does\n",
		       profile);
		return -EINVAL;
	}
	if (strcmp(parent, "platform") && !dsim_parent_is_pci()) {
		pr_err("parent must be platform or pci\n");
		return -EINVAL;
	}
	return 0;
}

static int dsim_init_pci(void)
{
	int err;

	err = pci_register_driver(&dsim_pci_driver);
	if (err)
		return err;
	mutex_lock(&dsim_lock);
	if (dsim_npci < 2) {
		pr_err("parent=pci needs two PCI devices 1234:11e8 (QEMU -device edu) or 1b36:0005 (-device pci-testdev); found %u\n",
		       dsim_npci);
		err = -ENODEV;
	} else {
		err = dsim_pair_create(dsim_pci_devs);
	}
	mutex_unlock(&dsim_lock);
	if (err)
		pci_unregister_driver(&dsim_pci_driver);
	return err;
}

static int __init dsim_init(void)
{
	int err;

	err = dsim_check_params();
	if (err)
		return err;
	dsim_debugfs_init();
	if (dsim_parent_is_pci()) {
		err = dsim_init_pci();
	} else {
		mutex_lock(&dsim_lock);
		err = dsim_pair_create(NULL);
		mutex_unlock(&dsim_lock);
	}
	if (err)
		dsim_debugfs_exit();
	return err;
}

static void __exit dsim_exit(void)
{
	mutex_lock(&dsim_lock);
	dsim_pair_destroy();
	mutex_unlock(&dsim_lock);
	if (dsim_parent_is_pci())
		pci_unregister_driver(&dsim_pci_driver);
	dsim_debugfs_exit();
}

module_init(dsim_init);
module_exit(dsim_exit);

MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("Simulated Ethernet NIC pair with devmem TCP (netmem RX/TX) support");
MODULE_AUTHOR("libdevmemtcp authors");
