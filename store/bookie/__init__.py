"""store/bookie"""
