"""store/recovery"""
